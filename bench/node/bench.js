// kitfox (WASM, in Node) against better-sqlite3 on the same machine, in the
// same run: bulk insert of small documents, point reads by id, reopen time,
// file size. Results and method: bench/RESULTS.md, section "Node (WASM)".
//
//   node bench/node/bench.js [--docs N] [--reads N] [--runs N]
//
// kitfox: `put t $1` with lists of 1000 documents {name, n}, default
// durability (flushed every 250 ms). SQLite: WAL, synchronous=NORMAL, one
// transaction around a prepared INSERT, table (id integer primary key, name
// text, n int). Each measure is the median of the runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

import Database from 'better-sqlite3';

import { Kitfox } from '../../js/index.js';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const DOCS = opt('docs', 100_000);
const READS = opt('reads', 100_000);
const RUNS = opt('runs', 3);
const CHUNK = 1000;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-bench-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

function doc(i) {
  return { name: `user ${i} of the benchmark`, n: i };
}

// Random ids, the same for both.
let seed = 12345;
function rnd() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed;
}
const readIds = Array.from({ length: READS }, () => 1 + (rnd() % DOCS));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function kitfoxRun(run) {
  const file = path.join(dir, `kitfox-${run}.kfdb`);
  let t = performance.now();
  let db = await Kitfox.open(file);
  db.query('create collection t (name text, n int)');
  for (let start = 0; start < DOCS; start += CHUNK) {
    const docs = [];
    for (let i = start; i < Math.min(DOCS, start + CHUNK); i++) docs.push(doc(i));
    db.query('put t $1', [docs]);
  }
  db.sync();
  const insert = performance.now() - t;

  t = performance.now();
  let sum = 0;
  for (const id of readIds) sum += db.query('get t where id = $1', [id])[0].n;
  const readText = performance.now() - t;
  if (sum <= 0) throw new Error('bad reads');

  t = performance.now();
  const get = db.prepare('get t where id = $1');
  let sum2 = 0;
  for (const id of readIds) sum2 += get.query([id])[0].n;
  const read = performance.now() - t;
  if (sum2 !== sum) throw new Error('bad prepared reads');
  db.close();

  t = performance.now();
  db = await Kitfox.open(file);
  db.query('get t where id = 1');
  const reopen = performance.now() - t;
  db.close();
  return { insert, read, readText, reopen, bytes: fs.statSync(file).size };
}

function sqliteRun(run) {
  const file = path.join(dir, `sqlite-${run}.db`);
  let t = performance.now();
  let db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('create table t (id integer primary key, name text, n int)');
  const ins = db.prepare('insert into t (name, n) values (?, ?)');
  db.transaction(() => {
    for (let i = 0; i < DOCS; i++) {
      const d = doc(i);
      ins.run(d.name, d.n);
    }
  })();
  const insert = performance.now() - t;

  t = performance.now();
  const get = db.prepare('select id, name, n from t where id = ?');
  let sum = 0;
  for (const id of readIds) sum += get.get(id).n;
  const read = performance.now() - t;
  if (sum <= 0) throw new Error('bad reads');
  db.close();

  t = performance.now();
  db = new Database(file);
  db.prepare('select id, name, n from t where id = ?').get(1);
  const reopen = performance.now() - t;
  db.close();
  let bytes = fs.statSync(file).size;
  for (const ext of ['-wal', '-shm']) if (fs.existsSync(file + ext)) bytes += fs.statSync(file + ext).size;
  return { insert, read, readText: read, reopen, bytes };
}

const t0 = performance.now();
await Kitfox.wasmMemoryBytes(); // loads and instantiates the module
const moduleLoad = performance.now() - t0;

const results = { kitfox: [], sqlite: [] };
for (let run = 0; run < RUNS; run++) {
  results.kitfox.push(await kitfoxRun(run));
  results.sqlite.push(sqliteRun(run));
}
const summary = {};
for (const [name, runs] of Object.entries(results)) {
  summary[name] = Object.fromEntries(['insert', 'read', 'readText', 'reopen', 'bytes'].map((k) => [k, median(runs.map((r) => r[k]))]));
}
const k = summary.kitfox;
const s = summary.sqlite;
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
console.log(`node ${process.version}, ${os.cpus()[0].model}, ${os.cpus().length} cores; ${DOCS} docs, ${READS} reads, median of ${RUNS} runs`);
console.log(`kitfox module load + instantiate: ${fmt(moduleLoad, 1)} ms (once per process)`);
console.log();
console.log('| measure | kitfox (WASM) | better-sqlite3 | kitfox / sqlite |');
console.log('| --- | ---: | ---: | ---: |');
const row = (what, a, b, unit, digits, higherBetter) =>
  console.log(`| ${what} | ${fmt(a, digits)} ${unit} | ${fmt(b, digits)} ${unit} | ${(a / b).toFixed(2)}x${higherBetter ? ' (higher is better)' : ''} |`);
row('bulk insert', DOCS / (k.insert / 1000), DOCS / (s.insert / 1000), 'rows/s', 0, true);
row('point read by id, prepared (`db.prepare` / `stmt.get`)', READS / (k.read / 1000), READS / (s.read / 1000), 'reads/s', 0, true);
row('point read latency, prepared', (k.read * 1000) / READS, (s.read * 1000) / READS, 'µs', 2);
row('point read latency, kitfox `db.query(text)` (statement cache) vs prepared `get()`', (k.readText * 1000) / READS, (s.read * 1000) / READS, 'µs', 2);
row('reopen + first read', k.reopen, s.reopen, 'ms', 2);
row('file size', k.bytes / 1024, s.bytes / 1024, 'KiB', 0);
