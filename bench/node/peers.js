// kitfox (its WASM build, in Node) against the JavaScript peers, in one run,
// on the same data: PGlite + pgvector (Postgres in WASM), SQLite WASM
// (@sqlite.org/sqlite-wasm), better-sqlite3 (native SQLite addon),
// hnswlib-wasm and Orama. Each peer runs the measures it can do; the others
// get "—". Results and how to read them: bench/RESULTS.md, section "Node:
// kitfox vs the JavaScript peers"; flags and method: bench/README.md.
//
//   node bench/node/peers.js [--quick | --full] [--out FILE] [--svg FILE] [--dir PATH]
//
// Measures:
//   1. bulk load of 100,000 small documents {name, n} (no vector index), and
//      reopen + first read of that database, and its size on disk;
//   2. ANN index build over N x 128 clustered vectors (bench/node/clustered.js,
//      the port of bench/clustered.h; N = 20,000, --full 100,000) at m = 16,
//      ef_construction = 200, cosine;
//   3. `near` top-10 latency (p50, p99) and recall@10 against exact ground
//      truth on held-out queries, at ef 40, 100 and 200, plus exact search;
//   4. a filtered near (`where k = cluster of the query`: 1/40 of the data);
//   5. reopen + first near of the vector database, and its size on disk;
//   6. reopen + first near, in Node, of a 100,000 x 128 kitfox file built by
//      the native CLI (`kitfox import`), when the CLI is built.
// Before each measured block the program waits (up to --wait-quiet seconds)
// until other processes use less than a quarter of a core, and records the
// load average at the start and end of the block and the CPU others used
// during it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import { vector as pgvector } from '@electric-sql/pglite-pgvector';
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';
import * as orama from '@orama/orama';

import { Kitfox } from '../../js/index.js';
import { Clustered } from './clustered.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// --- options -----------------------------------------------------------------

const USAGE = `usage: node bench/node/peers.js [options]
  --quick            small and fast (about a minute): 50,000 docs, 5,000 vectors,
                     100 queries, 2 runs, the native 100k reopen file at 20,000 rows
  --full             100,000 vectors instead of 20,000
  --docs N           documents for the bulk load (default 100,000)
  --rows N           vectors (default 20,000; --full 100,000)
  --queries N        held-out queries (default 200)
  --clusters N       clusters of the generator (default 40)
  --runs N           timed runs per measure (default 3; reopen: 5)
  --ef LIST          ef values for near (default 40,100,200)
  --reopen-rows N    rows of the natively built kitfox file (default 100,000; 0 skips)
  --kitfox-cli PATH  the native CLI (default the newer of build-bench/kitfox and build/kitfox)
  --only LIST        run only these engines: kitfox,pglite,sqlite-wasm,better-sqlite3,hnswlib-wasm,orama
  --wait-quiet S     wait up to S seconds before each block for other processes to go
                     under 0.25 cores (default 60; 0: do not wait)
  --dir PATH         where the data directory is made (default the OS temp dir)
  --keep             keep the data directory
  --out FILE         also write the Markdown report to FILE
  --append FILE      also append the report to FILE (scripts/bench.sh joins the reports so)
  --svg FILE         write the recall/latency chart (SVG) to FILE
  -h, --help         this text`;

const argv = process.argv.slice(2);
const has = (name) => argv.includes(`--${name}`);
function val(name, def) {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return def;
  if (i + 1 >= argv.length) throw new Error(`--${name} needs a value`);
  return argv[i + 1];
}
if (has('help') || argv.includes('-h')) {
  console.log(USAGE);
  process.exit(0);
}
{
  const known = new Set(['quick', 'full', 'docs', 'rows', 'queries', 'clusters', 'runs', 'ef', 'reopen-rows', 'kitfox-cli', 'only',
    'wait-quiet', 'dir', 'keep', 'out', 'append', 'svg']);
  const takesValue = new Set(['docs', 'rows', 'queries', 'clusters', 'runs', 'ef', 'reopen-rows', 'kitfox-cli', 'only', 'wait-quiet',
    'dir', 'out', 'append', 'svg']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--') || !known.has(a.slice(2))) {
      console.error(`peers.js: unknown argument '${a}'\n${USAGE}`);
      process.exit(2);
    }
    if (takesValue.has(a.slice(2))) i++;
  }
}
const QUICK = has('quick');
const FULL = has('full');
const num = (name, def) => {
  const v = Number(val(name, def));
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a number`);
  return v;
};
const opt = {
  docs: num('docs', QUICK ? 50_000 : 100_000),
  rows: num('rows', FULL ? 100_000 : QUICK ? 5_000 : 20_000),
  queries: num('queries', QUICK ? 100 : 200),
  clusters: num('clusters', 40),
  runs: num('runs', QUICK ? 2 : 3),
  reopenRuns: QUICK ? 3 : 5,
  efs: String(val('ef', '40,100,200')).split(',').map(Number),
  reopenRows: num('reopen-rows', QUICK ? 20_000 : 100_000),
  cli: val('kitfox-cli', ''),
  only: val('only', '') ? new Set(val('only', '').split(',')) : null,
  waitQuiet: num('wait-quiet', 60),
  dir: val('dir', os.tmpdir()),
  keep: has('keep'),
  out: val('out', ''),
  append: val('append', ''),
  svg: val('svg', ''),
};
const DIM = 128;
const M = 16;
const EFC = 200;
const CHUNK = 1000;
const SEED_CENTRES = 42;
const SEED_DATA = 1;
const SEED_QUERIES = 999;
const ENGINES = ['kitfox', 'pglite', 'sqlite-wasm', 'better-sqlite3', 'hnswlib-wasm', 'orama'];
const LABEL = {
  kitfox: 'kitfox (WASM)',
  pglite: 'PGlite + pgvector',
  'sqlite-wasm': 'SQLite WASM',
  'better-sqlite3': 'better-sqlite3',
  'hnswlib-wasm': 'hnswlib-wasm',
  orama: 'Orama',
};
const on = (e) => !opt.only || opt.only.has(e) || e === 'kitfox';

const dir = fs.mkdtempSync(path.join(opt.dir, 'kitfox-peers-'));
process.on('exit', () => {
  if (opt.keep) console.error(`peers: data kept in ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
});
const log = (...a) => console.error('peers:', ...a);

// --- helpers -----------------------------------------------------------------

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const gc = () => globalThis.gc && globalThis.gc();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function dirBytes(p) {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.size;
  let sum = 0;
  for (const e of fs.readdirSync(p)) sum += dirBytes(path.join(p, e));
  return sum;
}
function fileBytes(...files) {
  let sum = 0;
  for (const f of files) if (fs.existsSync(f)) sum += fs.statSync(f).size;
  return sum;
}

// CPU use of other processes: busy jiffies of the whole machine minus this
// process's own CPU time.
function procStat() {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = line[3] + (line[4] || 0);
  const total = line.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / 100, t: performance.now(), own: process.cpuUsage() };
}
function othersCores(a, b) {
  const wall = (b.t - a.t) / 1000;
  const own = (b.own.user - a.own.user + b.own.system - a.own.system) / 1e6;
  return wall > 0 ? Math.max(0, (b.busy - a.busy - own) / wall) : 0;
}
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const conditions = [];
// Runs fn as one measured block: waits for a quiet machine first, records the
// conditions. `children` marks blocks that run child processes (their CPU
// then shows up as "others").
async function block(name, fn, { children = false } = {}) {
  gc();
  let waited = 0;
  if (opt.waitQuiet > 0) {
    const t0 = performance.now();
    for (;;) {
      const a = procStat();
      await sleep(1000);
      const busy = othersCores(a, procStat());
      if (busy < 0.25) break;
      if ((performance.now() - t0) / 1000 >= opt.waitQuiet) {
        log(`${name}: machine still busy (${busy.toFixed(2)} cores) after ${opt.waitQuiet} s; measuring anyway`);
        break;
      }
    }
    waited = (performance.now() - t0) / 1000;
  }
  const before = loadavg();
  const s0 = procStat();
  const t0 = performance.now();
  log(`${name} (load ${before})`);
  const result = await fn();
  const s1 = procStat();
  conditions.push({ name, before, after: loadavg(), others: children ? null : othersCores(s0, s1), seconds: (performance.now() - t0) / 1000, waited });
  return result;
}

const fmtN = (n, d = 0) =>
  n === undefined || n === null || Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const fmtMs = (ms) => (ms === undefined || ms === null || Number.isNaN(ms) ? '—' : ms >= 100 ? `${fmtN(ms, 0)} ms` : ms >= 10 ? `${fmtN(ms, 1)} ms` : `${fmtN(ms, 2)} ms`);
const fmtUs = (ms) => (ms === undefined || ms === null || Number.isNaN(ms) ? '—' : ms >= 10 ? `${fmtN(ms, 1)} ms` : `${fmtN(ms * 1000, 0)} µs`);
const fmtS = (ms) => (ms === undefined || ms === null || Number.isNaN(ms) ? '—' : `${fmtN(ms / 1000, 2)} s`);
const fmtMiB = (b) => (b === undefined || b === null || Number.isNaN(b) ? '—' : `${fmtN(b / 1048576, 1)} MiB`);

// --- data --------------------------------------------------------------------

log(`generating data: ${opt.docs} docs; ${opt.rows} x ${DIM} vectors, ${opt.clusters} clusters, ${opt.queries} queries`);
const docs = Array.from({ length: opt.docs }, (_, i) => ({ name: `user ${i} of the benchmark`, n: i }));
const gen = new Clustered(DIM, opt.clusters, SEED_CENTRES);
const data = gen.points(opt.rows, SEED_DATA);
const qs = gen.points(opt.queries, SEED_QUERIES);
const vec = (set, i) => set.vectors.subarray(i * DIM, (i + 1) * DIM);
const queries = Array.from({ length: opt.queries }, (_, i) => vec(qs, i));
const queryCluster = qs.clusterOf;

// Exact top-10 by cosine distance in double precision (ties by id); ids are
// 1-based (row i has id i + 1 in every engine).
function groundTruth(filtered) {
  const n = opt.rows;
  const inv = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let j = i * DIM; j < (i + 1) * DIM; j++) s += data.vectors[j] * data.vectors[j];
    inv[i] = 1 / Math.sqrt(s);
  }
  const out = [];
  const d = new Float64Array(n);
  for (let qi = 0; qi < opt.queries; qi++) {
    const q = queries[qi];
    let qn = 0;
    for (let j = 0; j < DIM; j++) qn += q[j] * q[j];
    qn = 1 / Math.sqrt(qn);
    const cand = [];
    for (let i = 0; i < n; i++) {
      if (filtered && data.clusterOf[i] !== queryCluster[qi]) continue;
      let s = 0;
      const o = i * DIM;
      for (let j = 0; j < DIM; j++) s += q[j] * data.vectors[o + j];
      d[i] = 1 - s * qn * inv[i];
      cand.push(i);
    }
    cand.sort((a, b) => d[a] - d[b] || a - b);
    out.push(new Set(cand.slice(0, 10).map((i) => i + 1)));
  }
  return out;
}
let t = performance.now();
const truth = groundTruth(false);
const truthFiltered = groundTruth(true);
log(`ground truth: ${fmtMs(performance.now() - t)}`);
const recallOf = (results, gt) => {
  let hit = 0;
  results.forEach((ids, qi) => ids.forEach((id) => (hit += gt[qi].has(id) ? 1 : 0)));
  return hit / (10 * results.length);
};

// --- versions and machine ----------------------------------------------------

const pkgVersion = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version;
const versions = {
  kitfox: JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version,
  pglite: pkgVersion('@electric-sql/pglite'),
  pgvectorPkg: pkgVersion('@electric-sql/pglite-pgvector'),
  sqliteWasm: pkgVersion('@sqlite.org/sqlite-wasm'),
  betterSqlite: pkgVersion('better-sqlite3'),
  hnswlib: pkgVersion('hnswlib-wasm'),
  orama: pkgVersion('@orama/orama'),
};
let commit = '';
try {
  commit = spawnSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'core', 'wasm', 'js'], { encoding: 'utf8' }).stdout.trim();
  if (dirty) commit += ' (core/wasm/js modified)';
} catch {
  // not a git checkout
}
const wasmFile = path.join(ROOT, 'dist/kitfox-core.wasm');
const machine = {
  cpu: os.cpus()[0]?.model.trim() ?? '?',
  cores: os.cpus().length,
  ram: `${fmtN(os.totalmem() / 1073741824, 1)} GiB`,
  kernel: `${os.type()} ${os.release()} ${os.arch()}`,
  node: process.version,
  wasm: `dist/kitfox-core.wasm ${fmtN(fs.statSync(wasmFile).size / 1024, 1)} KiB, built ${fs.statSync(wasmFile).mtime.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
};

// --- results -----------------------------------------------------------------

const R = {
  bulk: {}, // engine -> {ms: [..], extra}
  reopenDocs: {}, // engine -> ms
  sizeDocs: {}, // engine -> bytes
  build: {}, // engine -> {ms, load}
  near: {}, // engine -> {ef -> {p50, p99, recall}}
  exact: {}, // engine -> {p50, p99, recall}
  filtered: {}, // engine -> {p50, p99, recall, minRows}
  reopenVec: {}, // engine -> ms
  sizeVec: {}, // engine -> bytes
  mem: {}, // engine -> bytes: WASM heap after the vector phase (its peak: WASM memory never shrinks); Orama: JS heap growth
  notes: {}, // engine -> [text]
  native: null,
};
const note = (e, s) => (R.notes[e] ??= []).push(s);
// The size of an Emscripten module's WASM memory, or null when it does not say.
function wasmHeap(mod) {
  try {
    const n = mod?.HEAPU8?.byteLength ?? mod?.HEAP8?.byteLength ?? mod?.wasmMemory?.buffer?.byteLength;
    return typeof n === 'number' && n > 0 ? n : null;
  } catch {
    return null;
  }
}

// Times fn(q, qi) over all queries: one untimed pass, then opt.runs passes;
// p50/p99 are the medians over the passes of each pass's quantiles; the ids
// of the first timed pass give the recall.
async function timeQueries(fn, gt) {
  for (let qi = 0; qi < queries.length; qi++) await fn(queries[qi], qi);
  const p50s = [];
  const p99s = [];
  let first = null;
  let minRows = Infinity;
  for (let r = 0; r < opt.runs; r++) {
    const times = [];
    const ids = [];
    for (let qi = 0; qi < queries.length; qi++) {
      const t0 = performance.now();
      const res = await fn(queries[qi], qi);
      times.push(performance.now() - t0);
      ids.push(res);
      minRows = Math.min(minRows, res.length);
    }
    p50s.push(quantile(times, 0.5));
    p99s.push(quantile(times, 0.99));
    first ??= ids;
  }
  return { p50: median(p50s), p99: median(p99s), recall: recallOf(first, gt), minRows };
}

// =============================================================================
// 1. Bulk load of small documents, reopen, size.
// =============================================================================

const docChunks = [];
for (let s = 0; s < opt.docs; s += CHUNK) docChunks.push(docs.slice(s, s + CHUNK));

// kitfox: put t $1 with lists of 1000 documents, default durability (flushed
// every 250 ms), then sync.
async function kitfoxBulk(file, chunks) {
  fs.rmSync(file, { force: true });
  const db = await Kitfox.open(file);
  db.query('create collection t (name text, n int)');
  const t0 = performance.now();
  for (const c of chunks) db.query('put t $1', [c]);
  db.sync();
  const ms = performance.now() - t0;
  const t1 = performance.now();
  db.close();
  return { ms, close: performance.now() - t1 };
}

function sqliteBulk(file, chunks) {
  for (const ext of ['', '-wal', '-shm']) fs.rmSync(file + ext, { force: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('create table t (id integer primary key, name text, n int)');
  const ins = db.prepare('insert into t (name, n) values (?, ?)');
  const t0 = performance.now();
  db.transaction(() => {
    for (const c of chunks) for (const d of c) ins.run(d.name, d.n);
  })();
  const ms = performance.now() - t0;
  const t1 = performance.now();
  db.close();
  return { ms, close: performance.now() - t1 };
}

let sqlite3 = null;
async function sqliteWasm() {
  sqlite3 ??= await sqlite3InitModule({ print: () => {}, printErr: () => {} });
  return sqlite3;
}
// SQLite WASM: an in-memory database (its Node build has no file VFS: see
// README), one transaction around a prepared INSERT; persisted by exporting
// the image (sqlite3_js_db_export) to a file, timed apart.
async function sqliteWasmBulk(file, chunks) {
  const s3 = await sqliteWasm();
  const db = new s3.oo1.DB(':memory:');
  db.exec('create table t (id integer primary key, name text, n int)');
  const ins = db.prepare('insert into t (name, n) values (?, ?)');
  const t0 = performance.now();
  db.exec('begin');
  for (const c of chunks) for (const d of c) ins.bind([d.name, d.n]).stepReset();
  db.exec('commit');
  const ms = performance.now() - t0;
  ins.finalize();
  const t1 = performance.now();
  const bytes = s3.capi.sqlite3_js_db_export(db);
  fs.writeFileSync(file, bytes);
  const exportMs = performance.now() - t1;
  db.close();
  return { ms, close: exportMs };
}
async function sqliteWasmOpen(file) {
  const s3 = await sqliteWasm();
  const buf = fs.readFileSync(file);
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
  const db = new s3.oo1.DB();
  const p = s3.wasm.allocFromTypedArray(bytes);
  const rc = s3.capi.sqlite3_deserialize(db.pointer, 'main', p, bytes.length, bytes.length,
    s3.capi.SQLITE_DESERIALIZE_FREEONCLOSE | s3.capi.SQLITE_DESERIALIZE_RESIZEABLE);
  if (rc) throw new Error(`sqlite3_deserialize: ${rc}`);
  return db;
}

const pgOpen = (d) => PGlite.create(d, { extensions: { vector: pgvector } });
// PGlite: one instance on a data directory; per run a fresh table, batches of
// 1000 rows through unnest() of two array parameters, in one transaction.
async function pgBulk(pg, chunks) {
  await pg.exec('drop table if exists t; create table t (id int generated by default as identity primary key, name text, n int)');
  const arrays = chunks.map((c) => [c.map((d) => d.name), c.map((d) => d.n)]);
  const t0 = performance.now();
  await pg.transaction(async (tx) => {
    for (const a of arrays) await tx.query('insert into t (name, n) select * from unnest($1::text[], $2::int[])', a);
  });
  return { ms: performance.now() - t0 };
}

const oramaDocsSchema = { n: 'number' };
// Orama: insertMultiple in batches of 1000; only n is in the schema (indexed),
// name is stored with the document but not indexed (as in the other engines).
async function oramaBulk(chunks) {
  const copies = chunks.flat().map((d, i) => ({ id: String(i + 1), name: d.name, n: d.n }));
  const db = orama.create({ schema: oramaDocsSchema });
  const t0 = performance.now();
  await orama.insertMultiple(db, copies, CHUNK);
  return { ms: performance.now() - t0, db };
}

async function bulkPhase() {
  const warm = docChunks.slice(0, 10);
  const files = {
    kitfox: path.join(dir, 'docs.kfdb'),
    sqlite: path.join(dir, 'docs.sqlite'),
    sqliteWasm: path.join(dir, 'docs-wasm.sqlite'),
    pg: path.join(dir, 'docs-pg'),
    orama: path.join(dir, 'docs-orama.json'),
  };
  // Warm-up: 10,000 documents into a scratch database each.
  await kitfoxBulk(path.join(dir, 'warm.kfdb'), warm);
  if (on('better-sqlite3')) sqliteBulk(path.join(dir, 'warm.sqlite'), warm);
  if (on('sqlite-wasm')) await sqliteWasmBulk(path.join(dir, 'warm-wasm.sqlite'), warm);
  let pg = null;
  if (on('pglite')) {
    pg = await pgOpen(files.pg);
    await pgBulk(pg, warm);
  }
  if (on('orama')) await oramaBulk(warm);
  gc();

  const runs = { kitfox: [], 'better-sqlite3': [], 'sqlite-wasm': [], pglite: [], orama: [] };
  let oramaDb = null;
  for (let r = 0; r < opt.runs; r++) {
    await block(`bulk load run ${r + 1}`, async () => {
      runs.kitfox.push(await kitfoxBulk(files.kitfox, docChunks));
      gc();
      if (on('better-sqlite3')) runs['better-sqlite3'].push(sqliteBulk(files.sqlite, docChunks));
      gc();
      if (on('sqlite-wasm')) runs['sqlite-wasm'].push(await sqliteWasmBulk(files.sqliteWasm, docChunks));
      gc();
      if (pg) runs.pglite.push(await pgBulk(pg, docChunks));
      gc();
      if (on('orama')) {
        const o = await oramaBulk(docChunks);
        runs.orama.push({ ms: o.ms });
        oramaDb = o.db;
      }
    });
  }
  for (const [e, rs] of Object.entries(runs)) {
    if (!rs.length) continue;
    R.bulk[e] = { ms: median(rs.map((x) => x.ms)), runs: rs.map((x) => x.ms), close: median(rs.filter((x) => x.close !== undefined).map((x) => x.close)) };
  }
  if (pg) {
    const t1 = performance.now();
    await pg.close();
    R.bulk.pglite.close = performance.now() - t1;
  }
  // Orama persists through save() (a plain object): as JSON in a file.
  if (oramaDb) {
    const t1 = performance.now();
    fs.writeFileSync(files.orama, JSON.stringify(orama.save(oramaDb)));
    R.bulk.orama.close = performance.now() - t1;
    oramaDb = null;
  }
  gc();

  // Reopen + first read: one untimed round, then the median of opt.reopenRuns.
  const reopen = {
    kitfox: async () => {
      const db = await Kitfox.open(files.kitfox);
      const row = db.query('get t where id = 1')[0];
      return [row.n === 0, () => db.close()];
    },
    'better-sqlite3': async () => {
      const db = new Database(files.sqlite);
      const row = db.prepare('select id, name, n from t where id = ?').get(1);
      return [row.n === 0, () => db.close()];
    },
    'sqlite-wasm': async () => {
      const db = await sqliteWasmOpen(files.sqliteWasm);
      const n = db.selectValue('select n from t where id = 1');
      return [n === 0, () => db.close()];
    },
    pglite: async () => {
      const db = await pgOpen(files.pg);
      const row = (await db.query('select id, name, n from t where id = $1', [1])).rows[0];
      return [row.n === 0, () => db.close()];
    },
    orama: async () => {
      const raw = JSON.parse(fs.readFileSync(files.orama, 'utf8'));
      const db = orama.create({ schema: oramaDocsSchema });
      orama.load(db, raw);
      const doc = orama.getByID(db, '1');
      return [doc.n === 0, () => {}];
    },
  };
  await block('reopen (documents)', async () => {
    for (const [e, fn] of Object.entries(reopen)) {
      if (!on(e)) continue;
      const times = [];
      for (let r = 0; r <= opt.reopenRuns; r++) {
        gc();
        const t0 = performance.now();
        const [ok, close] = await fn();
        const ms = performance.now() - t0;
        if (!ok) throw new Error(`${e}: wrong first read after reopen`);
        await close();
        if (r > 0) times.push(ms);
      }
      R.reopenDocs[e] = median(times);
    }
  });
  R.sizeDocs.kitfox = fileBytes(files.kitfox);
  if (on('better-sqlite3')) R.sizeDocs['better-sqlite3'] = fileBytes(files.sqlite, files.sqlite + '-wal', files.sqlite + '-shm');
  if (on('sqlite-wasm')) R.sizeDocs['sqlite-wasm'] = fileBytes(files.sqliteWasm);
  if (on('pglite')) R.sizeDocs.pglite = dirBytes(files.pg);
  if (on('orama')) R.sizeDocs.orama = fileBytes(files.orama);
  fs.rmSync(files.pg, { recursive: true, force: true });
}

// =============================================================================
// 2-5. Vectors: build, near, filtered near, reopen, size.
// =============================================================================

const vecChunks = [];
for (let s = 0; s < opt.rows; s += CHUNK) {
  const c = [];
  for (let i = s; i < Math.min(opt.rows, s + CHUNK); i++) c.push({ k: data.clusterOf[i], e: vec(data, i) });
  vecChunks.push(c);
}
const vtext = (v) => `[${Array.prototype.join.call(v, ',')}]`;
const KITFOX_CREATE = `create collection d (k int, e vector<${DIM}> @hnsw(cosine, m=${M}, ef_construction=${EFC}))`;

async function kitfoxVec() {
  const file = path.join(dir, 'vec.kfdb');
  // Warm-up: 1000 vectors into a scratch database.
  {
    const w = await Kitfox.open(':memory:');
    w.query(KITFOX_CREATE);
    w.query('put d $1', [vecChunks[0]]);
    w.close();
  }
  let db = await Kitfox.open(file);
  db.query(KITFOX_CREATE);
  await block(`kitfox: build ${opt.rows} x ${DIM}`, async () => {
    const t0 = performance.now();
    for (const c of vecChunks) db.query('put d $1', [c]);
    db.sync();
    R.build.kitfox = { ms: performance.now() - t0 };
  });
  const t1 = performance.now();
  db.close();
  R.build.kitfox.close = performance.now() - t1;
  db = await Kitfox.open(file);
  R.near.kitfox = {};
  await block('kitfox: near', async () => {
    for (const ef of opt.efs) {
      const text = `get d select id near e $1 ef ${ef} limit 10`;
      R.near.kitfox[ef] = await timeQueries((q) => db.query(text, [q]).map((r) => r.id), truth);
    }
    R.exact.kitfox = await timeQueries((q) => db.query('get d select id near e $1 exact limit 10', [q]).map((r) => r.id), truth);
    R.filtered.kitfox = await timeQueries(
      (q, qi) => db.query('get d select id where k = $2 near e $1 limit 10', [q, queryCluster[qi]]).map((r) => r.id),
      truthFiltered,
    );
  });
  R.mem.kitfox = await Kitfox.wasmMemoryBytes();
  R.kitfoxPlans0 = {
    near: db.query('explain get d select id near e $1 ef 100 limit 10', [queries[0]]).filter((r) => r.op).map((r) => (r.detail ? `${r.op}: ${r.detail}` : r.op)),
    filtered: db.query('explain get d select id where k = $2 near e $1 limit 10', [queries[0], queryCluster[0]]).filter((r) => r.op).map((r) => (r.detail ? `${r.op}: ${r.detail}` : r.op)),
  };
  db.close();
  await block('kitfox: reopen (vectors)', async () => {
    const times = [];
    for (let r = 0; r <= opt.reopenRuns; r++) {
      gc();
      const t0 = performance.now();
      const d = await Kitfox.open(file);
      const rows = d.query('get d select id near e $1 limit 10', [queries[0]]);
      const ms = performance.now() - t0;
      if (rows.length !== 10) throw new Error('kitfox: reopen near');
      d.close();
      if (r > 0) times.push(ms);
    }
    R.reopenVec.kitfox = median(times);
  });
  R.sizeVec.kitfox = fileBytes(file);
  // The filtered near again with a secondary index on k (built by the first
  // query that uses it, before timing).
  db = await Kitfox.open(file);
  db.query('create index on d (k) @hash');
  await block('kitfox: filtered near with @hash on k', async () => {
    R.filteredIndexed = R.filteredIndexed ?? {};
    R.filteredIndexed.kitfox = await timeQueries(
      (q, qi) => db.query('get d select id where k = $2 near e $1 limit 10', [q, queryCluster[qi]]).map((r) => r.id),
      truthFiltered,
    );
  });
  R.kitfoxPlans = {
    filteredIndexed: db.query('explain get d select id where k = $2 near e $1 limit 10', [queries[0], queryCluster[0]]).filter((r) => r.op).map((r) => (r.detail ? `${r.op}: ${r.detail}` : r.op)),
  };
  db.query('drop index on d (k)');
  db.close();
  fs.rmSync(file, { force: true });
}

async function pgliteVec() {
  const pgdir = path.join(dir, 'vec-pg');
  let pg = await pgOpen(pgdir);
  await pg.exec('create extension if not exists vector');
  const settings = {};
  for (const s of ['fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', 'shared_buffers', 'maintenance_work_mem', 'max_parallel_maintenance_workers']) {
    settings[s] = (await pg.query(`show ${s}`)).rows[0][s];
  }
  R.pgSettings = settings;
  R.pgVersion = (await pg.query('select version() v')).rows[0].v.replace(/ on wasm32.*/, '');
  R.pgvectorVersion = (await pg.query("select extversion from pg_extension where extname = 'vector'")).rows[0].extversion;
  const load = async (table, chunks) => {
    await pg.exec(`create table ${table} (id int primary key, k int, e vector(${DIM}))`);
    let id = 1;
    const batches = chunks.map((c) => {
      const ids = [];
      const ks = [];
      const es = [];
      for (const d of c) {
        ids.push(id++);
        ks.push(d.k);
        es.push(`"${vtext(d.e)}"`);
      }
      return [ids, ks, `{${es.join(',')}}`];
    });
    const t0 = performance.now();
    await pg.transaction(async (tx) => {
      for (const b of batches) await tx.query(`insert into ${table} (id, k, e) select * from unnest($1::int[], $2::int[], $3::vector[])`, b);
    });
    return performance.now() - t0;
  };
  const index = (table) => `create index ${table}_e_idx on ${table} using hnsw (e vector_cosine_ops) with (m = ${M}, ef_construction = ${EFC})`;
  // The default maintenance_work_mem (64 MB) is too small for the 100k graph:
  // pgvector then builds it on disk, much slower.
  await pg.exec("set maintenance_work_mem = '512MB'");
  // Warm-up: 1000 vectors and their index in a scratch table.
  await load('w', vecChunks.slice(0, 1));
  await pg.exec(index('w'));
  await pg.exec('drop table w');
  R.build.pglite = {};
  await block(`pglite: load ${opt.rows} x ${DIM}`, async () => {
    R.build.pglite.load = await load('d', vecChunks);
  });
  await block(`pglite: create index (hnsw, m ${M}, ef_construction ${EFC})`, async () => {
    const t0 = performance.now();
    await pg.exec(index('d'));
    R.build.pglite.ms = performance.now() - t0;
  });
  R.mem.pglite = wasmHeap(pg.Module ?? pg.mod);
  await pg.exec('analyze d');
  const plan = async (sql, params) => (await pg.query(`explain ${sql}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n');
  const q0 = vtext(queries[0]);
  R.pgPlan = await plan('select id from d order by e <=> $1 limit 10', [q0]);
  if (!/Index Scan using d_e_idx/.test(R.pgPlan)) note('pglite', 'the planner did not choose the HNSW index for the plain near query');
  R.near.pglite = {};
  await block('pglite: near', async () => {
    for (const ef of opt.efs) {
      await pg.exec(`set hnsw.ef_search = ${ef}`);
      R.near.pglite[ef] = await timeQueries(
        async (q) => (await pg.query('select id from d order by e <=> $1 limit 10', [vtext(q)])).rows.map((r) => r.id),
        truth,
      );
    }
    // Exact: the same query without the index (a sequential scan and a sort).
    await pg.exec('set enable_indexscan = off');
    R.exact.pglite = await timeQueries(
      async (q) => (await pg.query('select id from d order by e <=> $1 limit 10', [vtext(q)])).rows.map((r) => r.id),
      truth,
    );
    await pg.exec('reset enable_indexscan');
    // Filtered: iterative index scans (pgvector >= 0.8) so that the filter
    // cannot leave fewer than 10 rows.
    await pg.exec('set hnsw.ef_search = 100');
    await pg.exec('set hnsw.iterative_scan = strict_order');
    R.pgFilteredPlan = await plan('select id from d where k = $2 order by e <=> $1 limit 10', [q0, queryCluster[0]]);
    R.filtered.pglite = await timeQueries(
      async (q, qi) => (await pg.query('select id from d where k = $2 order by e <=> $1 limit 10', [vtext(q), queryCluster[qi]])).rows.map((r) => r.id),
      truthFiltered,
    );
  });
  await pg.exec('create index d_k_idx on d (k); analyze d');
  await block('pglite: filtered near with a B-tree on k', async () => {
    R.filteredIndexed = R.filteredIndexed ?? {};
    R.pgFilteredIndexedPlan = await plan('select id from d where k = $2 order by e <=> $1 limit 10', [q0, queryCluster[0]]);
    R.filteredIndexed.pglite = await timeQueries(
      async (q, qi) => (await pg.query('select id from d where k = $2 order by e <=> $1 limit 10', [vtext(q), queryCluster[qi]])).rows.map((r) => r.id),
      truthFiltered,
    );
  });
  await pg.exec('drop index d_k_idx');
  const rel = (await pg.query("select pg_total_relation_size('d') t, pg_relation_size('d_e_idx') i")).rows[0];
  R.pgRelBytes = Number(rel.t);
  R.pgIndexBytes = Number(rel.i);
  await pg.close();
  await block('pglite: reopen (vectors)', async () => {
    const times = [];
    for (let r = 0; r <= opt.reopenRuns; r++) {
      gc();
      const t0 = performance.now();
      pg = await pgOpen(pgdir);
      const rows = (await pg.query('select id from d order by e <=> $1 limit 10', [q0])).rows;
      const ms = performance.now() - t0;
      if (rows.length !== 10) throw new Error('pglite: reopen near');
      await pg.close();
      if (r > 0) times.push(ms);
    }
    R.reopenVec.pglite = median(times);
  });
  R.sizeVec.pglite = dirBytes(pgdir);
  fs.rmSync(pgdir, { recursive: true, force: true });
}

// hnswlib-wasm 0.8.2 is built for browsers only (Emscripten ENVIRONMENT
// web,worker): in Node it throws "not compiled for this environment", and
// its loader then mounts IDBFS, which needs indexedDB. So the benchmark calls
// the package's Emscripten factory directly (no file system), with
// `importScripts` defined while it loads so that the module takes Node for
// a worker. Index operations then run as in a browser; saving and loading
// go through Emscripten's virtual file system (IDBFS in a browser), which
// has no Node file behind it here.
async function loadHnswlib() {
  const had = 'importScripts' in globalThis;
  if (!had) globalThis.importScripts = () => {};
  try {
    const factory = (await import('hnswlib-wasm/dist/hnswlib-317962d7.js')).default;
    return await factory({ print: () => {}, printErr: () => {} });
  } finally {
    if (!had) delete globalThis.importScripts;
  }
}

async function hnswlibVec() {
  const lib = await loadHnswlib();
  const items = Array.from({ length: opt.rows }, (_, i) => vec(data, i));
  const labels = Array.from({ length: opt.rows }, (_, i) => i);
  {
    const w = new lib.HierarchicalNSW('cosine', DIM, '');
    w.initIndex(CHUNK, M, EFC, 100);
    w.addPoints(items.slice(0, CHUNK), labels.slice(0, CHUNK), false);
  }
  const idx = new lib.HierarchicalNSW('cosine', DIM, '');
  idx.initIndex(opt.rows, M, EFC, 100);
  await block(`hnswlib-wasm: build ${opt.rows} x ${DIM}`, async () => {
    const t0 = performance.now();
    for (let s = 0; s < opt.rows; s += CHUNK) idx.addPoints(items.slice(s, s + CHUNK), labels.slice(s, s + CHUNK), false);
    R.build['hnswlib-wasm'] = { ms: performance.now() - t0 };
  });
  R.mem['hnswlib-wasm'] = wasmHeap(lib);
  R.near['hnswlib-wasm'] = {};
  await block('hnswlib-wasm: near', async () => {
    for (const ef of opt.efs) {
      idx.setEfSearch(ef);
      R.near['hnswlib-wasm'][ef] = await timeQueries((q) => Array.from(idx.searchKnn(q, 10, undefined).neighbors, (l) => l + 1), truth);
    }
    idx.setEfSearch(100);
    R.filtered['hnswlib-wasm'] = await timeQueries((q, qi) => {
      const c = queryCluster[qi];
      return Array.from(idx.searchKnn(q, 10, (l) => data.clusterOf[l] === c).neighbors, (l) => l + 1);
    }, truthFiltered);
  });
}

const oramaVecSchema = { k: 'number', e: `vector[${DIM}]` };
async function oramaVec() {
  // Orama takes vectors as plain arrays (it refuses a Float32Array).
  const odocs = [];
  for (let i = 0; i < opt.rows; i++) odocs.push({ id: String(i + 1), k: data.clusterOf[i], e: Array.from(vec(data, i)) });
  {
    const w = orama.create({ schema: oramaVecSchema });
    await orama.insertMultiple(w, odocs.slice(0, CHUNK).map((d) => ({ ...d })), CHUNK);
  }
  globalThis.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const db = orama.create({ schema: oramaVecSchema });
  await block(`orama: insert ${opt.rows} x ${DIM}`, async () => {
    const t0 = performance.now();
    await orama.insertMultiple(db, odocs, CHUNK);
    R.build.orama = { ms: null, insert: performance.now() - t0 };
  });
  globalThis.gc?.();
  R.mem.orama = process.memoryUsage().heapUsed - heap0;
  const file = path.join(dir, 'vec-orama.json');
  try {
    fs.writeFileSync(file, JSON.stringify(orama.save(db)));
  } catch (e) {
    note('orama', `save() to JSON failed: ${e.message}`);
  }
  // Orama's vector search is a scan over all vectors, keeping those whose
  // cosine similarity is at least `similarity` (default 0.8; every true
  // top-10 neighbour here is above it, which the recall checks).
  const search = (q, where) =>
    orama.search(db, { mode: 'vector', vector: { value: q, property: 'e' }, limit: 10, ...(where ? { where } : {}) }).hits.map((h) => Number(h.id));
  await block('orama: near', async () => {
    R.exact.orama = await timeQueries((q) => search(q), truth);
    R.filtered.orama = await timeQueries((q, qi) => search(q, { k: { eq: queryCluster[qi] } }), truthFiltered);
  });
  if (fs.existsSync(file)) {
    await block('orama: reopen (vectors)', async () => {
      const times = [];
      for (let r = 0; r <= opt.reopenRuns; r++) {
        gc();
        const t0 = performance.now();
        const d = orama.create({ schema: oramaVecSchema });
        orama.load(d, JSON.parse(fs.readFileSync(file, 'utf8')));
        const hits = orama.search(d, { mode: 'vector', vector: { value: queries[0], property: 'e' }, limit: 10 }).hits;
        const ms = performance.now() - t0;
        if (hits.length !== 10) throw new Error('orama: reopen near');
        if (r > 0) times.push(ms);
      }
      R.reopenVec.orama = median(times);
    });
    R.sizeVec.orama = fileBytes(file);
    fs.rmSync(file, { force: true });
  }
}

// =============================================================================
// 6. A kitfox file built by the native CLI, reopened in Node.
// =============================================================================

async function nativeReopen() {
  const n = opt.reopenRows;
  // The newest of the two builds' CLIs (scripts/bench.sh rebuilds build-bench/).
  const cli = opt.cli || [path.join(ROOT, 'build-bench/kitfox'), path.join(ROOT, 'build/kitfox')]
    .filter((p) => fs.existsSync(p))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  if (!n || !cli || !fs.existsSync(cli)) {
    R.native = { skipped: n ? 'no native CLI (build/kitfox): run `npm run build`' : 'skipped (--reopen-rows 0)' };
    return;
  }
  const set = n === opt.rows ? data : gen.points(n, SEED_DATA);
  const ndjson = path.join(dir, 'native.ndjson');
  const fd = fs.openSync(ndjson, 'w');
  let buf = [];
  for (let i = 0; i < n; i++) {
    buf.push(`{"k":${set.clusterOf[i]},"e":[${Array.prototype.join.call(set.vectors.subarray(i * DIM, (i + 1) * DIM), ',')}]}`);
    if (buf.length === 1000 || i === n - 1) {
      fs.writeSync(fd, buf.join('\n') + '\n');
      buf = [];
    }
  }
  fs.closeSync(fd);
  const file = path.join(dir, 'native.kfdb');
  let r = spawnSync(cli, [file, '-c', KITFOX_CREATE], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cli} create: ${r.stderr}`);
  let importMs = 0;
  await block(`native CLI: import ${n} x ${DIM}`, async () => {
    const t0 = performance.now();
    r = spawnSync(cli, ['import', file, 'd', ndjson], { encoding: 'utf8' });
    importMs = performance.now() - t0;
  }, { children: true });
  if (r.status !== 0) throw new Error(`${cli} import: ${r.stderr}`);
  fs.rmSync(ndjson, { force: true });
  const q = gen.points(1, SEED_QUERIES).vectors;
  await block(`reopen of the native ${n} x ${DIM} file in Node`, async () => {
    const open = [];
    const total = [];
    for (let i = 0; i <= opt.reopenRuns; i++) {
      gc();
      const t0 = performance.now();
      const db = await Kitfox.open(file);
      const t1 = performance.now();
      const rows = db.query('get d select id near e $1 limit 10', [q]);
      const t2 = performance.now();
      if (rows.length !== 10) throw new Error('native file: near');
      if (i === opt.reopenRuns) R.nativeStats = db.stats();
      db.close();
      if (i > 0) {
        open.push(t1 - t0);
        total.push(t2 - t0);
      }
    }
    R.native = { rows: n, cli: path.relative(ROOT, cli), importMs, open: median(open), total: median(total), bytes: fileBytes(file) };
  });
  fs.rmSync(file, { force: true });
}

// =============================================================================
// Run, then report.
// =============================================================================

const t0All = performance.now();
const t1 = performance.now();
await Kitfox.wasmMemoryBytes();
const kitfoxModuleMs = performance.now() - t1;

await bulkPhase();
await kitfoxVec();
if (on('pglite')) await pgliteVec();
if (on('hnswlib-wasm')) await hnswlibVec();
if (on('orama')) await oramaVec();
await nativeReopen();
if (on('better-sqlite3')) R.betterSqliteVersion = new Database(':memory:').prepare('select sqlite_version() v').get().v;
if (on('sqlite-wasm')) R.sqliteWasmVersion = (await sqliteWasm()).version.libVersion;
const totalS = (performance.now() - t0All) / 1000;

// --- report ------------------------------------------------------------------

const cols = ENGINES.filter(on);
// A row: cells per engine, each "value (ratio to kitfox)". `better` says
// which direction is better for the ratio's quantity.
function row(what, get, fmt, better) {
  const base = get('kitfox');
  const cells = cols.map((e) => {
    const v = get(e);
    if (v === undefined || v === null || Number.isNaN(v)) return '—';
    if (e === 'kitfox' || base === undefined || base === null || !base) return fmt(v);
    return `${fmt(v)} (${(v / base).toFixed(2)}x)`;
  });
  return `| ${what}${better ? ` (${better})` : ''} | ${cells.join(' | ')} |`;
}
const L = [];
const p = (s = '') => L.push(s);
const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
p(`## Node: kitfox vs the JavaScript peers — ${fmtN(opt.rows)} x ${DIM} vectors, ${fmtN(opt.docs)} documents (${date} UTC)`);
p();
p(`\`node bench/node/peers.js${argv.length ? ' ' + argv.join(' ') : ''}\` — ${fmtN(totalS, 0)} s. kitfox ${versions.kitfox} (commit ${commit || '?'}), ${machine.wasm}.`);
p();
p('| | |');
p('| --- | --- |');
p(`| CPU | ${machine.cpu}, ${machine.cores} logical CPUs, ${machine.ram} RAM |`);
p(`| system | ${machine.kernel}, Node ${machine.node} |`);
p(`| kitfox | ${versions.kitfox}, WASM build (Emscripten), module load + instantiate ${fmtMs(kitfoxModuleMs)} once per process |`);
if (on('pglite')) p(`| PGlite + pgvector | @electric-sql/pglite ${versions.pglite} (${R.pgVersion ?? '?'}), @electric-sql/pglite-pgvector ${versions.pgvectorPkg} (pgvector ${R.pgvectorVersion ?? '?'}) |`);
if (on('sqlite-wasm')) p(`| SQLite WASM | @sqlite.org/sqlite-wasm ${versions.sqliteWasm} (SQLite ${R.sqliteWasmVersion ?? '?'}), in-memory database |`);
if (on('better-sqlite3')) p(`| better-sqlite3 | ${versions.betterSqlite} (SQLite ${R.betterSqliteVersion ?? '?'}, native addon) |`);
if (on('hnswlib-wasm')) p(`| hnswlib-wasm | ${versions.hnswlib} (hnswlib in WASM, browser build loaded as a worker) |`);
if (on('orama')) p(`| Orama | @orama/orama ${versions.orama} (pure JavaScript) |`);
p();
p('### Results');
p();
p(`Cells are the value, then the ratio peer / kitfox of that value in parentheses; "—": the peer cannot do it (see the notes). Runs: bulk loads median of ${opt.runs}, near latencies median over ${opt.runs} passes of ${fmtN(opt.queries)} queries, reopens median of ${opt.reopenRuns}; builds run once.`);
p();
p(`| measure | ${cols.map((e) => LABEL[e]).join(' | ')} |`);
p(`| --- | ${cols.map(() => '---:').join(' | ')} |`);
p(row(`bulk load, ${fmtN(opt.docs)} docs {name, n}`, (e) => (R.bulk[e] ? opt.docs / (R.bulk[e].ms / 1000) : null), (v) => `${fmtN(v)} rows/s`, 'higher is better'));
p(row('reopen + first read, docs', (e) => R.reopenDocs[e], fmtMs, 'lower is better'));
p(row('size on disk, docs', (e) => R.sizeDocs[e], fmtMiB, 'lower is better'));
p(row(`ANN build, ${fmtN(opt.rows)} x ${DIM} (m ${M}, ef_construction ${EFC})`, (e) => R.build[e]?.ms, fmtS, 'lower is better'));
for (const ef of opt.efs) {
  p(row(`near top-10 p50, ef ${ef}`, (e) => R.near[e]?.[ef]?.p50, fmtUs, 'lower is better'));
  p(row(`recall@10, ef ${ef}`, (e) => R.near[e]?.[ef]?.recall, (v) => fmtN(v, 3)));
}
p(row('exact top-10 p50 (scan)', (e) => R.exact[e]?.p50, fmtUs, 'lower is better'));
p(row('recall@10, exact', (e) => R.exact[e]?.recall, (v) => fmtN(v, 3)));
p(row(`filtered near p50 (k = cluster, 1/${opt.clusters} of rows), ef 100`, (e) => R.filtered[e]?.p50, fmtUs, 'lower is better'));
p(row('recall@10, filtered', (e) => R.filtered[e]?.recall, (v) => fmtN(v, 3)));
p(row('reopen + first near, vectors', (e) => R.reopenVec[e], fmtMs, 'lower is better'));
p(row('size on disk, vectors + index', (e) => R.sizeVec[e], fmtMiB, 'lower is better'));
p(row('memory after the vector phase: WASM heap (Orama: JS heap growth)', (e) => R.mem[e], fmtMiB, 'lower is better'));
p();
p('Latency detail (p50 / p99, recall@10):');
p();
p('| engine | query | p50 | p99 | recall@10 | fewest rows returned |');
p('| --- | --- | ---: | ---: | ---: | ---: |');
for (const e of cols) {
  for (const ef of opt.efs) if (R.near[e]?.[ef]) p(`| ${LABEL[e]} | near, ef ${ef} | ${fmtUs(R.near[e][ef].p50)} | ${fmtUs(R.near[e][ef].p99)} | ${fmtN(R.near[e][ef].recall, 3)} | ${R.near[e][ef].minRows} |`);
  if (R.exact[e]) p(`| ${LABEL[e]} | exact | ${fmtUs(R.exact[e].p50)} | ${fmtUs(R.exact[e].p99)} | ${fmtN(R.exact[e].recall, 3)} | ${R.exact[e].minRows} |`);
  if (R.filtered[e]) p(`| ${LABEL[e]} | ${e === 'orama' ? 'filtered (its where index, then a scan of the matches)' : 'filtered, ef 100'} | ${fmtUs(R.filtered[e].p50)} | ${fmtUs(R.filtered[e].p99)} | ${fmtN(R.filtered[e].recall, 3)} | ${R.filtered[e].minRows} |`);
  const fi = R.filteredIndexed?.[e];
  if (fi) p(`| ${LABEL[e]} | filtered, ef 100, ${e === 'kitfox' ? '`@hash` index on k' : 'B-tree index on k'} | ${fmtUs(fi.p50)} | ${fmtUs(fi.p99)} | ${fmtN(fi.recall, 3)} | ${fi.minRows} |`);
}
p();
p('Other times (not in the ratios):');
p();
if (R.bulk.kitfox) p(`- kitfox bulk load: \`close()\` after the load (checkpoint: writes the image) ${fmtMs(R.bulk.kitfox.close)}; the load itself is timed to the end of \`sync()\`.`);
if (R.bulk['sqlite-wasm']) p(`- SQLite WASM: exporting the in-memory database to a file (\`sqlite3_js_db_export\` + \`writeFileSync\`) ${fmtMs(R.bulk['sqlite-wasm'].close)}.`);
if (R.bulk.pglite) p(`- PGlite: \`close()\` after the loads ${fmtMs(R.bulk.pglite.close)}.`);
if (R.bulk.orama) p(`- Orama: \`save()\` + \`JSON.stringify\` + \`writeFileSync\` of the loaded documents ${fmtMs(R.bulk.orama.close)}.`);
if (R.build.kitfox) p(`- kitfox vectors: \`close()\` after the build (checkpoint with vectors and graph) ${fmtMs(R.build.kitfox.close)}.`);
if (R.build.pglite) p(`- PGlite vectors: loading the ${fmtN(opt.rows)} rows before \`CREATE INDEX\` ${fmtS(R.build.pglite.load)}; table + index ${fmtMiB(R.pgRelBytes)}, of which the index ${fmtMiB(R.pgIndexBytes)}.`);
if (R.build.orama) p(`- Orama vectors: \`insertMultiple\` of the ${fmtN(opt.rows)} documents (no ANN index is built) ${fmtS(R.build.orama.insert)}.`);
for (const [e, ns] of Object.entries(R.notes)) for (const s of ns) p(`- ${LABEL[e]}: ${s}`);
p();
if (R.native) {
  p(`### Reopen in Node of a ${R.native.rows ? fmtN(R.native.rows) : ''} x ${DIM} file built natively`);
  p();
  if (R.native.skipped) {
    p(`Not measured: ${R.native.skipped}.`);
  } else {
    p(`Built by \`${R.native.cli} import\` (native, all cores) in ${fmtS(R.native.importMs)}: the same generator's first ${fmtN(R.native.rows)} points, \`${KITFOX_CREATE}\`. File ${fmtMiB(R.native.bytes)}. In Node, median of ${opt.reopenRuns} after an untimed round (file in the OS page cache):`);
    p();
    p('| | time | budget |');
    p('| --- | ---: | ---: |');
    p(`| \`Kitfox.open\` | ${fmtMs(R.native.open)} | |`);
    p(`| \`Kitfox.open\` + first \`near\` (ef 100, limit 10) | ${fmtMs(R.native.total)} | < 50 ms |`);
    if (R.nativeStats) p(`\nAfter open: \`stats().memoryBytes\` ${fmtMiB(R.nativeStats.memoryBytes)}, WASM heap ${fmtMiB(R.nativeStats.wasmMemoryBytes)}, index rebuilt on open: ${R.nativeStats.open?.indexRebuilt ? 'yes' : 'no'}.`);
  }
  p();
}
p('### Method');
p();
p(`- Data: ${fmtN(opt.docs)} documents \`{name: "user I of the benchmark", n: I}\`; vectors from \`bench/node/clustered.js\` (the port of \`bench/clustered.h\`, bit-identical output): ${opt.clusters} centres from seed ${SEED_CENTRES}, ${fmtN(opt.rows)} points from stream ${SEED_DATA}, ${fmtN(opt.queries)} held-out queries from stream ${SEED_QUERIES}; each point carries \`k\` = its cluster. Ground truth: exact top-10 by cosine distance, computed by this program in double precision (ties by id).`);
p(`- Inputs are built before timing, in the shape each API takes: kitfox lists of 1000 objects (\`put t $1\`), PGlite arrays per 1000 rows (\`unnest\`), SQLite one prepared INSERT per row in one transaction, Orama \`insertMultiple\` batches of 1000. Each engine first loads 10,000 documents / 1,000 vectors into a scratch database (warm-up).`);
p(`- Bulk load: engines in turn within each run, ${opt.runs} runs, median. Durability as each is used by default or commonly: kitfox default (\`sync\` every 250 ms; the load is timed to the end of \`db.sync()\`, an fdatasync); better-sqlite3 WAL + \`synchronous=NORMAL\` (as bench/node/bench.js; commit does not fsync the WAL); SQLite WASM in memory (no durability; its Node build has no file VFS); PGlite on a data directory with its defaults${R.pgSettings ? ` (fsync=${R.pgSettings.fsync}, synchronous_commit=${R.pgSettings.synchronous_commit}: PGlite turns fsync off, so nothing is flushed to the disk)` : ''}; Orama in memory (persisted only by \`save()\`).`);
p(`- ANN build: kitfox \`put d $1\` of 1000 documents \`{k, e: Float32Array}\` into \`${KITFOX_CREATE}\` (linking is part of each put), timed to the end of \`sync()\`; PGlite: rows loaded first (timed apart), then \`CREATE INDEX ... USING hnsw (e vector_cosine_ops) WITH (m = ${M}, ef_construction = ${EFC})\` with \`maintenance_work_mem = 512MB\` (one process: no parallel build); hnswlib-wasm: \`initIndex(N, ${M}, ${EFC}, 100)\` and \`addPoints\` of 1000 Float32Arrays at a time. kitfox and hnswlib-wasm run single-threaded in WASM, as does PGlite.`);
p(`- near: one untimed pass over the queries, then ${opt.runs} timed passes; each query timed alone (\`performance.now()\`), p50/p99 of a pass, median over passes; recall@10 from the first timed pass. kitfox \`db.query('get d select id near e $1 ef N limit 10', [Float32Array])\`; PGlite \`select id from d order by e <=> $1 limit 10\` with \`hnsw.ef_search = N\` and the vector as pgvector text (its serialisation is in the time: it is how a JS caller passes it); hnswlib-wasm \`setEfSearch(N)\` + \`searchKnn(Float32Array, 10)\`; Orama \`search({mode: 'vector', limit: 10})\` — a scan, with its default similarity threshold 0.8 (the true neighbours are all above it here). Exact: kitfox \`near ... exact\`, PGlite the same SQL with \`enable_indexscan = off\`.`);
p('- Memory: the size of each engine\'s WASM memory after its vector phase, which is its peak (WASM memory grows and never shrinks; kitfox\'s one module also served the documents phase before it); Orama, plain JS: the growth of the JS heap over its insert, after a GC on both sides; better-sqlite3 is native ("—"). A "—" for a WASM engine means its module does not expose its memory.');
p(`- Filtered near: \`k = cluster of the query\` (${fmtN(100 / opt.clusters, 1)}% of the rows, fully correlated with the neighbourhood), ef 100: kitfox \`get d select id where k = $2 near e $1 limit 10\` (its planner picks exact search over the matching rows or a filtered graph search); PGlite \`where k = $2 order by e <=> $1 limit 10\` with \`hnsw.iterative_scan = strict_order\` (no index on k); hnswlib-wasm \`searchKnn\` with a JS filter callback on the label; Orama \`where: {k: {eq}}\`. Recall against the exact top-10 among the matching rows. Neither engine has an index on k in the main table; the detail table also has both with one (kitfox \`create index on d (k) @hash\`, PGlite \`create index on d (k)\` + \`analyze\`), created after the other measures and dropped before the sizes.`);
p(`- Reopen: open the closed database and answer a first read (documents) or a first near (vectors): one untimed round, then the median of ${opt.reopenRuns}; files are in the OS page cache. kitfox's WASM module is already loaded (once per process, ${fmtMs(kitfoxModuleMs)}, shown above); PGlite's reopen includes starting a Postgres WASM instance, which each \`PGlite.create\` does; SQLite WASM reopens by \`readFileSync\` + \`sqlite3_deserialize\` of the exported image; Orama by \`readFileSync\` + \`JSON.parse\` + \`load()\`; better-sqlite3 opens the file (lazily). hnswlib-wasm has no reopen in Node (its files live in Emscripten's virtual file system, IDBFS in a browser).`);
p('- Sizes: kitfox the `.kfdb` after close; better-sqlite3 database + WAL after close; SQLite WASM the exported image; PGlite the whole data directory (it includes the catalog and WAL segments of an empty cluster, tens of MB); Orama the JSON of `save()`.');
if (R.pgPlan) {
  // The plan's node names only (no costs, no vector literals).
  const nodes = (plan) =>
    plan
      .split('\n')
      .map((l) => l.trim().replace(/^->\s*/, ''))
      .filter((l) => /^(Limit|Sort|Index Scan|Seq Scan|Bitmap|Filter)/.test(l) && !/^Sort Key/.test(l))
      .map((l) => l.replace(/\s+\(cost.*$/, '').replace(/\(k = \d+\)/, '(k = $2)'))
      .join(' → ');
  p(`- PGlite plans (EXPLAIN): near: ${nodes(R.pgPlan)}; filtered: ${nodes(R.pgFilteredPlan)}; filtered with the B-tree on k: ${nodes(R.pgFilteredIndexedPlan ?? '')}.`);
}
if (R.kitfoxPlans0) {
  const steps = (a) => (a ?? []).map((x) => `"${x}"`).join(' → ');
  p(`- kitfox plans (\`explain\`): near: ${steps(R.kitfoxPlans0.near)}; filtered: ${steps(R.kitfoxPlans0.filtered)}; filtered with \`@hash\` on k: ${steps(R.kitfoxPlans?.filteredIndexed)}.`);
}
p();
p('### Conditions');
p();
p('Load average (1, 5, 15 min) at the start and end of each measured block, and the CPU other processes used during it (machine busy time minus this process; blocks that ran a child process show "—").');
p();
p('| block | seconds | waited for quiet | load at start | load at end | others (cores) |');
p('| --- | ---: | ---: | --- | --- | ---: |');
for (const c of conditions) p(`| ${c.name} | ${fmtN(c.seconds, 1)} | ${fmtN(c.waited, 0)} s | ${c.before} | ${c.after} | ${c.others === null ? '—' : fmtN(c.others, 2)} |`);
p();
const report = L.join('\n');
console.log(report);
if (opt.out) {
  fs.writeFileSync(opt.out, report + '\n');
  log(`report written to ${opt.out}`);
}
if (opt.append) fs.appendFileSync(opt.append, '\n' + report + '\n');

// --- chart -------------------------------------------------------------------

function svgChart() {
  const series = [];
  const add = (e, color, pts) => pts.length && series.push({ label: LABEL[e], color, pts });
  const anns = (e) => opt.efs.filter((ef) => R.near[e]?.[ef]).map((ef) => ({ x: R.near[e][ef].p50, y: R.near[e][ef].recall, ef }));
  const exact = (e, tag) => (R.exact[e] ? [{ x: R.exact[e].p50, y: R.exact[e].recall, tag }] : []);
  add('kitfox', '#d9480f', [...anns('kitfox'), ...exact('kitfox', 'exact')]);
  add('pglite', '#1864ab', [...anns('pglite'), ...exact('pglite', 'exact (no index)')]);
  add('hnswlib-wasm', '#2b8a3e', anns('hnswlib-wasm'));
  add('orama', '#862e9c', exact('orama', 'scan'));
  const all = series.flatMap((s) => s.pts);
  if (!all.length) return null;
  const W = 760;
  const H = 460;
  const ml = 64;
  const mr = 200;
  const mt = 64;
  const mb = 56;
  const lx0 = Math.floor(Math.log10(Math.min(...all.map((q) => q.x))));
  const lx1 = Math.ceil(Math.log10(Math.max(...all.map((q) => q.x))));
  const lo = Math.min(...all.map((q) => q.y));
  const step = 1 - lo <= 0.05 ? 0.01 : 1 - lo <= 0.2 ? 0.05 : 0.1;
  const y0 = Math.max(0, Math.floor((lo - step / 2) / step) * step);
  const y1 = 1 + (1 - y0) * 0.04; // a little room above recall 1
  const X = (x) => ml + ((Math.log10(x) - lx0) / Math.max(1, lx1 - lx0)) * (W - ml - mr);
  const Y = (y) => mt + (1 - (y - y0) / (y1 - y0)) * (H - mt - mb);
  const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const f1 = (v) => v.toFixed(1);
  const o = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  o.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  o.push(`<text x="${ml}" y="22" font-size="15" font-weight="bold">near top-10 in Node: p50 latency against recall@10</text>`);
  o.push(`<text x="${ml}" y="40" fill="#555">${esc(`${fmtN(opt.rows)} x ${DIM} clustered vectors (${opt.clusters} clusters), ${fmtN(opt.queries)} held-out queries, m ${M}, ef_construction ${EFC}`)}</text>`);
  o.push(`<text x="${ml}" y="55" fill="#555">${esc(`${machine.cpu}, Node ${machine.node}, one thread; bench/node/peers.js, ${date} UTC`)}</text>`);
  for (let e = lx0; e <= lx1; e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) > lx1 + 1e-9) continue;
      const x = X(v);
      o.push(`<line x1="${f1(x)}" y1="${mt}" x2="${f1(x)}" y2="${H - mb}" stroke="${m === 1 ? '#ccc' : '#eee'}"/>`);
      const label = v >= 1 ? `${v} ms` : `${Math.round(v * 1000)} µs`;
      o.push(`<text x="${f1(x)}" y="${H - mb + 16}" text-anchor="middle" fill="#333">${label}</text>`);
    }
  }
  for (let i = 0; y0 + i * step <= 1 + 1e-9; i++) {
    const y = y0 + i * step;
    const py = Y(y);
    o.push(`<line x1="${ml}" y1="${f1(py)}" x2="${W - mr}" y2="${f1(py)}" stroke="#eee"/>`);
    o.push(`<text x="${ml - 6}" y="${f1(py + 4)}" text-anchor="end" fill="#333">${y.toFixed(2)}</text>`);
  }
  o.push(`<rect x="${ml}" y="${mt}" width="${W - ml - mr}" height="${H - mt - mb}" fill="none" stroke="#888"/>`);
  o.push(`<text x="${(ml + W - mr) / 2}" y="${H - 16}" text-anchor="middle">p50 latency per query (log scale; lower is better)</text>`);
  o.push(`<text transform="translate(16 ${(mt + H - mb) / 2}) rotate(-90)" text-anchor="middle">recall@10 (higher is better)</text>`);
  let exactLabels = 0;
  series.forEach((s, i) => {
    const pts = s.pts.filter((q) => q.ef).sort((a, b) => a.ef - b.ef);
    if (pts.length > 1) o.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map((q) => `${f1(X(q.x))},${f1(Y(q.y))}`).join(' ')}"/>`);
    pts.forEach((q, j) => {
      o.push(`<circle cx="${f1(X(q.x))}" cy="${f1(Y(q.y))}" r="4" fill="${s.color}"/>`);
      // Only the lowest ef is labelled: the line runs through the efs in order.
      if (j === 0) o.push(`<text x="${f1(X(q.x) + 7)}" y="${f1(Y(q.y) + 14)}" fill="${s.color}" font-size="10">ef ${q.ef}</text>`);
    });
    for (const q of s.pts.filter((q) => q.tag)) {
      // Exact points sit near recall 1: their labels go above and below in turn.
      o.push(`<rect x="${f1(X(q.x) - 4)}" y="${f1(Y(q.y) - 4)}" width="8" height="8" fill="#fff" stroke="${s.color}" stroke-width="2"/>`);
      o.push(`<text x="${f1(X(q.x))}" y="${f1(Y(q.y) + (exactLabels++ % 2 ? 18 : -9))}" text-anchor="middle" fill="${s.color}" font-size="10">${esc(q.tag)}</text>`);
    }
    const ly = mt + 10 + i * 22;
    o.push(`<line x1="${W - mr + 16}" y1="${ly}" x2="${W - mr + 40}" y2="${ly}" stroke="${s.color}" stroke-width="2"/>`);
    o.push(`<circle cx="${W - mr + 28}" cy="${ly}" r="4" fill="${s.color}"/>`);
    o.push(`<text x="${W - mr + 46}" y="${ly + 4}">${esc(s.label)}</text>`);
  });
  let ly = mt + 10 + series.length * 22 + 8;
  o.push(`<text x="${W - mr + 16}" y="${ly + 4}" fill="#555">dots: ef ${esc(opt.efs.join(', '))},</text>`);
  o.push(`<text x="${W - mr + 16}" y="${ly + 18}" fill="#555">left to right</text>`);
  ly += 36;
  o.push(`<rect x="${W - mr + 24}" y="${ly - 4}" width="8" height="8" fill="#fff" stroke="#555" stroke-width="2"/>`);
  o.push(`<text x="${W - mr + 40}" y="${ly + 4}" fill="#555">exact search / scan</text>`);
  o.push('</svg>');
  return o.join('\n') + '\n';
}
if (opt.svg) {
  const svg = svgChart();
  if (svg) {
    fs.writeFileSync(opt.svg, svg);
    log(`chart written to ${opt.svg}`);
  }
}
