// Browser benchmark: reopen after a page refresh over OPFS in Debian's
// Chromium. A page connects (kitfox/worker: worker start, WASM load, open)
// and runs a first near query; the page is reloaded and the same is timed,
// `runs` times. The database (N x dim clustered vectors under
// @hnsw(cosine, m=16, ef_construction)) is made by the native CLI, cached in
// bench/data/, and copied into OPFS by the page; all of it in a normal
// profile (OPFS on disk) and in a private window (OPFS in memory). For
// reference, the same
// file's open + first near in Node (the same WASM module, a real file), and
// the raw read of the file through a sync access handle in a worker.
//
//   node bench/browser/reopen.js [--quick] [--n 100000] [--dim 128]
//        [--ef-construction 200] [--runs 10] [--dir DIR] [--out FILE]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { serve } from '../../scripts/serve.js';
import { ARGS, CHROMIUM, argv, flag, opt, root } from './common.js';
import { cachedDatabase, makeDatabase } from './make-db.js';

const quick = flag('--quick');
const N = Number(opt('--n', quick ? 20000 : 100000));
const DIM = Number(opt('--dim', 128));
const EFC = Number(opt('--ef-construction', 200));
const RUNS = Number(opt('--runs', quick ? 5 : 10));
const dataDir = path.resolve(opt('--dir', path.join(root, 'bench', 'data')));
const outFile = opt('--out', null);
const log = (s) => process.stderr.write(s + '\n');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const ms = (x) => x.toFixed(1);

function queryVector() {
  const q = new Float32Array(DIM);
  for (let i = 0; i < DIM; i++) q[i] = Math.sin(i + 1);
  return q;
}

async function nodeReference(file) {
  const { Kitfox } = await import('../../js/index.js');
  const t0 = performance.now();
  await Kitfox.wasmMemoryBytes();
  const load = performance.now() - t0;
  const opens = [];
  const firsts = [];
  for (let i = 0; i < RUNS; i++) {
    const a = performance.now();
    const db = await Kitfox.open(file);
    const b = performance.now();
    db.near('docs', 'embed', queryVector(), { limit: 10, ef: 100 });
    const c = performance.now();
    db.close();
    opens.push(b - a);
    firsts.push(c - b);
  }
  return { load, open: median(opens), near: median(firsts) };
}

// In `context`: copy the file into OPFS, open it once, then `runs` times
// reload the page and time connect + first near; then the raw read of the
// whole file through a sync access handle.
async function measureIn(context, server, runs) {
  const page = await context.newPage();
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  const ready = async () => page.waitForFunction(() => window.ready === true);
  await page.goto(`${server.url}/tests/browser/page.html`);
  await ready();
  log('copying the file into OPFS');
  await page.evaluate(async (url) => {
    const r = await fetch(url);
    const dir = await navigator.storage.getDirectory();
    const w = await (await dir.getFileHandle('bench.kfdb', { create: true })).createWritable();
    await r.body.pipeTo(w);
  }, '/bench-db.kfdb');
  const measure = () =>
    page.evaluate(async (dim) => {
      const q = new Float32Array(dim);
      for (let i = 0; i < dim; i++) q[i] = Math.sin(i + 1);
      const t0 = performance.now();
      const db = await kitfox.connect('bench.kfdb');
      const t1 = performance.now();
      const rows = await db.near('docs', 'embed', q, { limit: 10, ef: 100 });
      const t2 = performance.now();
      if (rows.length !== 10) throw new Error(`near returned ${rows.length} rows`);
      window.db = db; // left open, as a page is when it is refreshed
      const t = db.timings;
      return { total: t2 - t0, connect: t1 - t0, start: t.startMs, load: t.loadMs, open: t.openMs, near: t2 - t1 };
    }, DIM);
  const first = await measure();
  const out = [];
  for (let i = 0; i < runs; i++) {
    await page.reload();
    await ready();
    out.push(await measure());
    log(`  run ${i + 1}/${runs}: ${ms(out.at(-1).total)} ms`);
  }
  await page.evaluate(() => db.close());
  // The raw read of the whole file through a sync access handle into fresh
  // WASM memory, in a worker: what any open that reads the file pays.
  const raw = await page.evaluate(async (runs) => {
    const src = `onmessage = async (e) => {
      const dir = await navigator.storage.getDirectory();
      const out = [];
      for (let k = 0; k < e.data; k++) {
        const h = await (await dir.getFileHandle('bench.kfdb')).createSyncAccessHandle();
        const n = h.getSize();
        const mem = new WebAssembly.Memory({ initial: Math.ceil(n / 65536) + 1 });
        const t0 = performance.now();
        h.read(new Uint8Array(mem.buffer, 0, n), { at: 0 });
        out.push(performance.now() - t0);
        h.close();
      }
      postMessage(out);
    };`;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    const r = await new Promise((res) => {
      w.onmessage = (e) => res(e.data);
      w.postMessage(runs);
    });
    w.terminate();
    return r;
  }, Math.min(runs, 5));
  await page.close();
  return { runs: out, raw, first };
}

async function main() {
  const file = path.join(dataDir, `browser-${N}x${DIM}-ef${EFC}.kfdb`);
  if (!cachedDatabase(file)) {
    log(`making ${file} with the native CLI (once; cached)`);
    makeDatabase({ out: file, n: N, dim: DIM, efConstruction: EFC, log });
  }
  const size = fs.statSync(file).size;
  // The repository, and the file (which may live elsewhere: --dir).
  const server = await serve({ port: 0, root, files: { '/bench-db.kfdb': file } });
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-chromium-'));
  let context = null;
  let browser = null;
  try {
    // A normal profile (OPFS is a file on disk), then a private window's
    // (an incognito context: OPFS in memory).
    context = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, args: ARGS, headless: true });
    const normal = await measureIn(context, server, RUNS);
    await context.close();
    context = null;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    const version = browser.version();
    context = await browser.newContext();
    const incognito = await measureIn(context, server, Math.min(RUNS, 5));
    const node = await nodeReference(file);
    const table = ({ runs, raw }) => {
      const col = (k) => runs.map((r) => r[k]);
      const row = (name, k, note) =>
        `| ${name} | ${ms(median(col(k)))} | ${ms(Math.min(...col(k)))} | ${ms(Math.max(...col(k)))} | ${note} |`;
      return [
        row('reopen: connect + first near', 'total', 'what a refresh costs'),
        row('connect', 'connect', 'worker start, WASM load (overlapping), open'),
        row('worker start', 'start', 'from `new Worker` to its main module running (imports fetched and evaluated)'),
        row('WASM load', 'load', 'fetch + compile + instantiate, from then'),
        row('open over OPFS', 'open', 'Kitfox.open: lock and handles (beside the end of the WASM load), the engine reading and checking the image'),
        row('first near', 'near', 'incl. postMessage both ways'),
        `| raw read of the whole file (sync access handle) | ${ms(median(raw))} | ${ms(Math.min(...raw))} | ${ms(Math.max(...raw))} | ${(size / 2 ** 20 / (median(raw) / 1000)).toFixed(0)} MiB/s into fresh WASM memory |`,
      ];
    };
    const cpu = os.cpus()[0]?.model?.trim() || 'unknown CPU';
    const lines = [
      `### Reopen after a page refresh, ${N.toLocaleString('en-US')} x ${DIM} (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
      '',
      `\`node bench/browser/reopen.js${argv.length ? ' ' + argv.join(' ') : ''}\``,
      '',
      `- Machine: ${cpu}, ${os.cpus().length} logical CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB; ${os.type()} ${os.release()}; Chromium ${version} (Debian's, headless, driven by playwright-core); Node ${process.version}.`,
      `- Data: ${N.toLocaleString('en-US')} documents \`{title, category, embed: vector<${DIM}>}\`, clustered unit vectors, \`@hnsw(cosine, m=16, ef_construction=${EFC})\`, made by the native CLI and copied into OPFS; file ${(size / 2 ** 20).toFixed(1)} MiB (checkpointed: image only).`,
      `- Each run: reload the page (which had the database open), then \`connect('bench.kfdb')\` from kitfox/worker (a new module worker: fetch + instantiate the WASM, open over OPFS) and a first \`near\` top-10 at ef=100, timed in the page. ${RUNS} runs after one unmeasured first open.`,
      `- Profiles: a normal one (a user-data directory: OPFS is a file on disk, reads through a sync access handle are system calls) and a private window's (an incognito context: OPFS lives in memory behind an IPC hop; ${incognito.runs.length} runs). The OPFS host times 8 small reads on open and reads vector tables and graphs block by block on first use when they are cheap, else the whole file in one call (js/hosts/opfs.js).`,
      '',
      '#### Normal profile',
      '',
      '| ms | median | min | max | |',
      '| --- | ---: | ---: | ---: | --- |',
      ...table(normal),
      '',
      '#### Private window (in-memory OPFS)',
      '',
      '| ms | median | min | max | |',
      '| --- | ---: | ---: | ---: | --- |',
      ...table(incognito),
      '',
      `Reference, the same file in Node (same WASM module, a file in the page cache, median of ${RUNS}): open ${ms(node.open)} ms, first near ${ms(node.near)} ms (module load ${ms(node.load)} ms once per process). First open after the copy in the browser: ${ms(normal.first.total)} ms (normal profile), ${ms(incognito.first.total)} ms (private window).`,
    ];
    const report = lines.join('\n') + '\n';
    process.stdout.write(report);
    if (outFile) fs.writeFileSync(outFile, report);
  } finally {
    if (context) await context.close();
    if (browser) await browser.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
    await server.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
