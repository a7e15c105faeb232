// The web demo's page script: kitfox runs in a dedicated worker over OPFS
// (connect() from kitfox/worker); this thread only sends statements and
// draws. demo-worker.js, imported in that worker, generates the sample.
// Every tab of the demo shares the one database: one tab's worker holds the
// file and serves the others; each tab follows the others' writes through
// the connection's change event.
import { connect } from '../js/worker.js';

const NAME = 'kitfox-demo.kfdb';
const MODULE = new URL('./demo-worker.js', import.meta.url);
const DIM = 128;
const BUILD_KEY = 'kitfox-demo-build';

const PRESETS = [
  ['near', 'get docs select title, category near embed $1 limit 10'],
  ['match', 'get docs select title, category, year match title $2 limit 10'],
  ['filtered near', 'get docs select title, category, year where category = "travel" and year >= 2010 near embed $1 limit 10'],
  ['hybrid (fuse)', 'get docs select title, category match title $2 near embed $1 fuse limit 10'],
  ['exact near', 'get docs select title, category near embed $1 exact limit 10'],
  ['group', 'get docs select category, count(*), avg(year) group category order count(*) desc limit 16'],
  ['explain', 'explain get docs where category = "tech" near embed $1 limit 10'],
  ['put', 'put docs {title: "my notes on a mountain river trail", category: "travel", year: 2025, embed: $1}'],
];

const $ = (id) => document.getElementById(id);
let db = null;
let busy = false;
let queryVector = null;
const latencies = []; // {ms, label}
let queryGen = 0; // counts the queries run: a result older than the newest is not drawn
let shownRead = null; // the read whose rows the table shows (run again when another tab writes)

// ---- formatting ------------------------------------------------------------
const fmtMs = (ms) => (ms >= 10000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);
const fmtBytes = (b) => (b >= 1 << 30 ? `${(b / 2 ** 30).toFixed(2)} GiB` : b >= 1 << 20 ? `${(b / 2 ** 20).toFixed(1)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${b} B`);
const fmtInt = (n) => n.toLocaleString('en-US');

function cell(v) {
  if (v === null || v === undefined) return ['', ''];
  if (v instanceof Float32Array) {
    const head = Array.from(v.subarray(0, 3), (x) => x.toFixed(3)).join(', ');
    return [`[${head}, … ${v.length} dims]`, 'vec'];
  }
  if (typeof v === 'number') return [Number.isInteger(v) ? String(v) : v.toPrecision(5), 'num'];
  if (typeof v === 'bigint') return [String(v), 'num'];
  if (v instanceof Date) return [v.toISOString(), ''];
  if (v instanceof Uint8Array) return [`${v.length} bytes`, ''];
  if (typeof v === 'object') return [JSON.stringify(v, (k, x) => (x instanceof Float32Array ? `[${x.length} floats]` : x)), ''];
  return [String(v), ''];
}

function renderTable(rows) {
  const table = $('results');
  table.replaceChildren();
  const shown = rows.slice(0, 200);
  const cols = [];
  for (const r of shown.slice(0, 50)) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  const head = table.createTHead().insertRow();
  for (const c of cols) {
    const th = document.createElement('th');
    th.textContent = c;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const r of shown) {
    const tr = body.insertRow();
    for (const c of cols) {
      const td = tr.insertCell();
      const [text, cls] = cell(r[c]);
      td.textContent = text;
      if (cls) td.className = cls;
    }
  }
}

// ---- chart -------------------------------------------------------------------
function drawChart() {
  const svg = $('chart');
  const W = Math.max(320, Math.round(svg.clientWidth || 640));
  svg.setAttribute('viewBox', `0 0 ${W} 160`);
  const H = 160;
  const top = 14;
  const bottom = 18;
  const left = 46;
  const last = latencies.slice(-30);
  const max = Math.max(1, ...last.map((l) => l.ms));
  const ns = 'http://www.w3.org/2000/svg';
  const el = (name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  svg.replaceChildren();
  const plotH = H - top - bottom;
  for (const f of [0, 0.5, 1]) {
    const y = top + plotH * (1 - f);
    el('line', { x1: left, x2: W, y1: y, y2: y, stroke: '#e3e1dc' });
    el('text', { x: left - 4, y: y + 3, 'text-anchor': 'end' }, fmtMs(max * f));
  }
  if (!last.length) {
    el('text', { x: (W + left) / 2, y: H / 2, 'text-anchor': 'middle' }, 'run a query to see its latency here');
    return;
  }
  const slot = (W - left) / 30;
  last.forEach((l, i) => {
    const h = Math.max(1, (l.ms / max) * plotH);
    const x = left + i * slot + 2;
    const bar = el('rect', { x, y: top + plotH - h, width: slot - 4, height: h, rx: 2, fill: l.error ? '#b3261e' : '#d2601a' });
    const title = document.createElementNS(ns, 'title');
    title.textContent = `${l.label}: ${fmtMs(l.ms)}`;
    bar.appendChild(title);
    el('text', { x: x + (slot - 4) / 2, y: top + plotH - h - 3, 'text-anchor': 'middle' }, l.ms < 10 ? l.ms.toFixed(1) : l.ms.toFixed(0));
    el('text', { x: x + (slot - 4) / 2, y: H - 5, 'text-anchor': 'middle' }, l.label.slice(0, 6));
  });
}

// ---- OPFS from this thread (no database open) ---------------------------------
async function fileSize(name) {
  try {
    const dir = await navigator.storage.getDirectory();
    return (await (await dir.getFileHandle(name)).getFile()).size;
  } catch {
    return 0;
  }
}

async function writeFile(bytes) {
  const dir = await navigator.storage.getDirectory();
  const w = await (await dir.getFileHandle(NAME, { create: true })).createWritable();
  await w.write(bytes);
  await w.close();
  await dir.removeEntry(NAME + '~').catch(() => {});
}

// ---- state -------------------------------------------------------------------
function setBusy(b) {
  busy = b;
  for (const id of ['create', 'export', 'delete', 'run', 'size', 'import']) $(id).disabled = b;
}

function message(text, bad = false) {
  $('sample-message').textContent = text;
  $('sample-message').className = bad ? 'message bad' : 'message';
}

function progress(frac, text) {
  $('progress').hidden = frac === null;
  const bar = $('bar');
  bar.classList.toggle('busy', frac === 'busy');
  if (typeof frac === 'number') bar.style.width = `${(frac * 100).toFixed(1)}%`;
  $('progress-text').textContent = text || '';
}

async function refreshStats() {
  const s = await db.stats();
  const docs = s.collections.find((c) => c.name === 'docs');
  $('stat-docs').textContent = docs ? fmtInt(docs.documents) : '0';
  $('stat-file').textContent = fmtBytes(s.fileBytes);
  $('stat-mem').textContent = fmtBytes(s.memoryBytes);
  $('stat-heap').textContent = fmtBytes(s.wasmMemoryBytes);
  return docs ? docs.documents : 0;
}

function showBuild() {
  const b = JSON.parse(localStorage.getItem(BUILD_KEY) || 'null');
  $('time-load').textContent = b ? fmtMs(b.loadMs) : '–';
  $('time-index').textContent = b ? fmtMs(b.indexMs) : '–';
  if (b && [...$('size').options].some((o) => Number(o.value) === b.n)) $('size').value = String(b.n);
  if (b) $('time-load').title = `${fmtInt(b.n)} documents, inserted in batches of 1000`;
}

async function pickVector(id) {
  const rows = await db.query('get docs select title, embed where id = $1', [id]).catch(() => []);
  if (rows.length && rows[0].embed) {
    queryVector = rows[0].embed;
    $('vec-title').textContent = `“${rows[0].title}”`;
  } else {
    queryVector = new Float32Array(DIM).map((_, i) => Math.sin(i + 1));
    $('vec-title').textContent = 'no such document: a fixed vector';
  }
}

function showRole() {
  $('tab-role').textContent = !db ? '–' : db.isLeader ? 'serves the database' : 'follows another tab';
  document.body.dataset.role = !db ? '' : db.isLeader ? 'leader' : 'follower';
}

// Another tab's write (or this tab's own) landed: the numbers and the rows
// shown follow. One refresh at a time; a burst of changes makes one more.
let following = false;
let followAgain = false;
async function follow({ collections }) {
  $('last-change').textContent = `${collections.join(', ')} at ${new Date().toLocaleTimeString('en-GB')}`;
  $('last-change').title = 'the collections the last write that landed changed, from any tab';
  if (following) {
    followAgain = true;
    return;
  }
  following = true;
  try {
    do {
      followAgain = false;
      if (!db || busy) break; // what this tab is doing refreshes them afterwards
      await refreshStats();
      const read = shownRead;
      const gen = queryGen;
      if (read) {
        const rows = await db.query(read.text, read.params);
        if (gen === queryGen && shownRead === read) {
          $('result-count').textContent = `${fmtInt(rows.length)} row${rows.length === 1 ? '' : 's'} (updated after a write)${rows.length > 200 ? ' (first 200 shown)' : ''}`;
          renderTable(rows);
        }
      }
    } while (followAgain);
  } catch {
    // the next change or query tries again
  } finally {
    following = false;
  }
}

// Every tab that opens the demo shares the database. A refresh while the
// worker was busy (building the sample) leaves the old worker running for
// a few seconds: connect() waits for it to let go of the file.
async function openDb() {
  const slow = setTimeout(() => message('Waiting for the database: the previous page’s worker is still finishing…'), 700);
  try {
    db = await connect(NAME, { module: MODULE, lockTimeout: 15000 });
  } finally {
    clearTimeout(slow);
  }
  db.on('change', follow);
  db.on('leader', showRole);
  showRole();
  message('');
  return db;
}

// Drops every collection (the file stays, and so do the other tabs).
async function dropAll() {
  for (const { name } of await db.query('collections')) await db.query(`drop collection ${name}`);
}

// ---- actions -------------------------------------------------------------------
async function runQuery(label = 'query') {
  if (busy || !db) return;
  const text = $('query').value.trim();
  if (!text) return;
  $('query-error').textContent = '';
  $('query').classList.remove('bad');
  const params = [queryVector, $('text-param').value];
  const gen = ++queryGen;
  const t0 = performance.now();
  try {
    const rows = await db.query(text, params);
    const ms = performance.now() - t0;
    shownRead = /^\s*get\b/i.test(text) ? { text, params } : null;
    latencies.push({ ms, label });
    $('time-query').textContent = fmtMs(ms);
    $('result-count').textContent = `${fmtInt(rows.length)} row${rows.length === 1 ? '' : 's'} in ${fmtMs(ms)}${rows.length > 200 ? ' (first 200 shown)' : ''}`;
    renderTable(rows);
    if (!/^\s*(get|explain)\b/i.test(text)) await refreshStats();
  } catch (e) {
    if (gen === queryGen) shownRead = null;
    const ms = performance.now() - t0;
    latencies.push({ ms, label, error: true });
    $('query-error').textContent = e.message + (e.position >= 0 ? `\n${text.split('\n').join(' ')}\n${' '.repeat(e.position)}^` : '');
    $('query').classList.add('bad');
    if (e.position >= 0) {
      $('query').focus();
      $('query').setSelectionRange(e.position, Math.min(text.length, e.position + 1));
    }
  }
  drawChart();
}

async function createSample() {
  const n = Number($('size').value);
  setBusy(true);
  message('');
  try {
    // Through the database, not by deleting the file: the other tabs keep
    // their connections and follow.
    await dropAll();
    progress(0, 'starting…');
    const { loadMs } = await db.call('createSample', { n, dim: DIM }, {
      onProgress: (p) => progress(p.done / p.of, `generating and inserting documents: ${fmtInt(p.done)} / ${fmtInt(p.of)}`),
    });
    $('time-load').textContent = fmtMs(loadMs);
    const { indexMs, saveMs } = await db.call('buildIndex', { m: 16, efConstruction: 100 }, {
      onProgress: (p) => progress('busy', p.phase === 'index' ? `building the HNSW index over ${fmtInt(n)} vectors…` : 'writing the file (checkpoint)…'),
    });
    localStorage.setItem(BUILD_KEY, JSON.stringify({ n, loadMs, indexMs, saveMs }));
    showBuild();
    progress(null);
    message(`Created ${fmtInt(n)} documents: inserted in ${fmtMs(loadMs)}, index built in ${fmtMs(indexMs)}, written in ${fmtMs(saveMs)}. Refresh the page to measure the reopen.`);
    await refreshStats();
    await pickVector(Number($('vec-id').value) || 1);
    setBusy(false);
    await runQuery('near');
  } catch (e) {
    progress(null);
    message(e.message, true);
  } finally {
    setBusy(false);
  }
}

async function exportFile() {
  setBusy(true);
  try {
    const bytes = await db.export();
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
    a.download = NAME;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    message(`Exported ${fmtBytes(bytes.length)}: the native CLI opens it (kitfox ${NAME} -c 'get docs count').`);
  } catch (e) {
    message(e.message, true);
  } finally {
    setBusy(false);
  }
}

// Importing replaces the database file, which only works while no other
// tab holds it: when this tab closes its connection, another tab of the
// demo takes the file over at once, and writing it is refused. The file is
// opened first on its own (from its bytes, in a worker of its own): one
// that is no kitfox database, or a damaged one, is refused before the
// database it would replace is touched.
async function importFile(file) {
  setBusy(true);
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    try {
      const probe = await connect(bytes.slice());
      await probe.close();
    } catch (e) {
      throw new Error(`${e.message} (the database was left as it was)`);
    }
    await db?.close();
    db = null;
    try {
      await writeFile(bytes);
    } catch (e) {
      if (e && e.name === 'NoModificationAllowedError')
        throw new Error('importing replaces the database file, and another tab of the demo holds it open: close the other tabs, then import');
      throw e;
    }
    await openDb();
    localStorage.removeItem(BUILD_KEY);
    showBuild();
    const n = await refreshStats();
    await pickVector(1);
    message(`Imported ${file.name} (${fmtBytes(bytes.length)}): ${fmtInt(n)} documents.`);
  } catch (e) {
    message(`Could not open ${file.name}: ${e.message}`, true);
    if (!db) await openDb().catch(() => {});
  } finally {
    setBusy(false);
    $('import').value = '';
  }
}

async function deleteDb() {
  setBusy(true);
  try {
    await dropAll();
    await db.checkpoint(); // the file shrinks to an empty image
    localStorage.removeItem(BUILD_KEY);
    showBuild();
    await refreshStats();
    $('results').replaceChildren();
    $('result-count').textContent = '';
    shownRead = null;
    message('Deleted.');
  } catch (e) {
    message(e.message, true);
  } finally {
    setBusy(false);
  }
}

function unsupported(why) {
  $('nosupport').hidden = false;
  $('nosupport-why').textContent = why;
  $('app').hidden = true;
}

// ---- start: open (this is the reopen after a refresh) -------------------------
async function start() {
  if (typeof Worker === 'undefined' || !navigator.storage || typeof navigator.storage.getDirectory !== 'function') {
    unsupported('It has no Web Workers or no OPFS (navigator.storage.getDirectory).');
    return;
  }
  for (const [label, text] of PRESETS) {
    const b = document.createElement('button');
    b.textContent = label;
    b.onclick = () => {
      $('query').value = text;
      runQuery(label);
    };
    $('presets').appendChild(b);
  }
  $('query').value = PRESETS[0][1];
  $('query').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      runQuery();
    }
  });
  $('run').onclick = () => runQuery();
  $('create').onclick = createSample;
  $('export').onclick = exportFile;
  $('delete').onclick = deleteDb;
  $('import').onchange = (e) => e.target.files[0] && importFile(e.target.files[0]);
  $('vec-id').onchange = () => pickVector(Number($('vec-id').value) || 1);
  $('vec-random').onclick = async () => {
    const n = Number($('stat-docs').textContent.replace(/,/g, '')) || 1;
    $('vec-id').value = 1 + Math.floor(Math.random() * n);
    await pickVector(Number($('vec-id').value));
  };
  showBuild();
  drawChart();
  window.addEventListener('resize', drawChart);

  setBusy(true);
  const had = (await fileSize(NAME)) > 0;
  const q = new Float32Array(DIM).map((_, i) => Math.sin(i + 1));
  try {
    const t0 = performance.now();
    await openDb();
    const t1 = performance.now();
    let first = null;
    if (had) {
      try {
        await db.near('docs', 'embed', q, { limit: 10 });
        first = performance.now() - t1;
      } catch {
        // a database without the sample collection: the reopen is connect alone
      }
    }
    const total = performance.now() - t0;
    const t = db.timings;
    const n = await refreshStats();
    if (!db.isLeader) {
      // Another tab serves the database: nothing was reopened here.
      $('reopen-detail').textContent =
        `Another tab of the demo serves the database: this one connected to it in ${fmtMs(t1 - t0)}` +
        (first !== null ? `, first near query ${fmtMs(first)}` : '') +
        ` · ${fmtInt(n)} documents. Refresh the tab that serves it (or close the others) to measure a reopen.`;
    } else if (had) {
      $('reopen-ms').textContent = fmtMs(total);
      $('reopen-detail').textContent =
        `connect ${fmtMs(t1 - t0)} (worker start and WASM load ${fmtMs(Math.max(0, t1 - t0 - t.openMs))}, open over OPFS ${fmtMs(t.openMs)})` +
        (first !== null ? ` + first near query ${fmtMs(first)}` : '') +
        ` · ${fmtInt(n)} documents, ${$('stat-file').textContent}`;
      document.body.dataset.reopenMs = total.toFixed(1);
    } else {
      $('reopen-detail').textContent = `New database (connect took ${fmtMs(t1 - t0)}). Create the sample below, then refresh the page.`;
    }
    await pickVector(1);
    setBusy(false);
    if (n > 0) await runQuery('near');
  } catch (e) {
    if (e.code === 'invalid' && /OPFS/.test(e.message)) unsupported(e.message);
    else if (e.code === 'locked') message('The demo database is held by another page that does not share it: close that page, then refresh.', true);
    else message(e.message, true);
  } finally {
    if (db) setBusy(false);
  }
  document.body.dataset.ready = 'true';
}

start();
