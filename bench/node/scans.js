// Scans, aggregates, groups and a top-k with no index, in Node: kitfox's
// WASM build against better-sqlite3 (SQLite as a native addon) and SQLite
// WASM (@sqlite.org/sqlite-wasm, in memory), over the same documents in one
// process. The queries of kitfox_query_bench's section "Scans, aggregates
// and sorts with no index", at the size a browser or an edge function holds.
//
//   node bench/node/scans.js [--quick] [--rows N] [--runs N] [--dir PATH] [--out FILE] [--append FILE]
//
// Each query runs `runs` times on each engine in turn (kitfox, better-sqlite3,
// SQLite WASM), the first two untimed, and the median of the rest is
// reported; the three answers are compared every time (a difference stops
// the program).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

import Database from 'better-sqlite3';
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';

import { Kitfox } from '../../js/index.js';

const args = process.argv.slice(2);
const WITH_VALUE = ['rows', 'runs', 'dir', 'out', 'append'];
for (let i = 0; i < args.length; i++) {
  const a = args[i].replace(/^--/, '');
  if (WITH_VALUE.includes(a)) i++;
  else if (a !== 'quick' && a !== 'help') {
    console.error(`scans.js: unknown option '${args[i]}' (--help lists them)`);
    process.exit(2);
  }
}
const flag = (name) => args.includes(`--${name}`);
const val = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return dflt;
  if (i + 1 >= args.length) throw new Error(`--${name} needs a value`);
  return args[i + 1];
};
if (flag('help')) {
  console.log('usage: node bench/node/scans.js [--quick] [--rows N] [--runs N] [--dir PATH] [--out FILE] [--append FILE]\n' +
    '  --quick   50,000 documents, 5 runs (default 200,000 and 9)');
  process.exit(0);
}
const quick = flag('quick');
const ROWS = Number(val('rows', quick ? 50000 : 200000));
const RUNS = Number(val('runs', quick ? 5 : 9));
if (!(ROWS > 0) || !(RUNS >= 3)) throw new Error('--rows must be above 0 and --runs at least 3');
const dir = fs.mkdtempSync(path.join(val('dir', os.tmpdir()), 'kitfox-scans-'));

// The documents of kitfox_query_bench: {name, city, age, score}, from a
// fixed-seed generator; 1,000 cities, names that are distinct.
let seed = 0x2545f491;
const rnd = () => {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
};
const docs = [];
for (let i = 0; i < ROWS; i++) {
  docs.push({
    name: `user${(i * 7919) % ROWS}-${Math.floor(rnd() * 1e6)}`,
    city: `city${Math.floor(rnd() * 1000)}`,
    age: Math.floor(rnd() * 90),
    score: rnd() * 2 - 0.5,
  });
}
const someName = docs[Math.floor(ROWS / 3)].name;

// [label, kitfox, its params, SQL, its params]. Every answer is a list of
// rows of plain values, compared as JSON (floats rounded to 9 digits).
const QUERIES = [
  ['a filter no document passes', 'get p where score < -1 count', [],
    'select count(*) from p where score < -1', []],
  ['a float filter, a quarter passes', 'get p where score < 0 count', [],
    'select count(*) from p where score < 0', []],
  ['text equality', 'get p where name = $1 count', [someName],
    'select count(*) from p where name = ?', [someName]],
  ['`in` a list of four ints', 'get p where age in [1, 2, 3, 50] count', [],
    'select count(*) from p where age in (1, 2, 3, 50)', []],
  ['text containing three letters, any case', 'get p where name ~ $1 count', ['R12'],
    "select count(*) from p where name like '%' || ? || '%'", ['R12']],
  ['count and sum', 'get p select count(*), sum(age)', [],
    'select count(*), sum(age) from p', []],
  ['min and max of a text, an average', 'get p select min(name), max(name), avg(score)', [],
    'select min(name), max(name), avg(score) from p', []],
  ['1,000 groups', 'get p select city, count(*), sum(age) group city order city limit 3', [],
    'select city, count(*), sum(age) from p group by city order by city limit 3', []],
  ['a group a document', 'get p select name, count(*) group name order name limit 3', [],
    'select name, count(*) from p group by name order by name limit 3', []],
  ['top 10 by a float, descending', 'get p select name, score order score desc limit 10', [],
    'select name, score from p order by score desc limit 10', []],
  ['an equality, then a top 10 by a text', 'get p select name where age = $1 order name limit 10', [30],
    'select name from p where age = ? order by name limit 10', [30]],
];

const round = (v) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(9)) : v);
const canon = (rows) => JSON.stringify(rows.map((r) => Object.values(r).filter((_, i, a) => !(Object.keys(r)[i] === 'id')).map(round)));

async function main() {
  // kitfox: a file in the directory, loaded 10,000 documents a put.
  const kf = await Kitfox.open(path.join(dir, 'scans.kfdb'));
  kf.query('create collection p (name text, city text, age int, score float)');
  for (let i = 0; i < ROWS; i += 10000) kf.query('put p $1', [docs.slice(i, i + 10000)]);
  kf.sync();
  // better-sqlite3: a file (WAL), one transaction.
  const bs = new Database(path.join(dir, 'scans.sqlite'));
  bs.pragma('journal_mode = WAL');
  bs.exec('create table p (id integer primary key, name text, city text, age int, score real)');
  const ins = bs.prepare('insert into p (name, city, age, score) values (?, ?, ?, ?)');
  bs.transaction(() => { for (const d of docs) ins.run(d.name, d.city, d.age, d.score); })();
  // SQLite WASM: in memory (its Node build has no file VFS).
  const s3 = await sqlite3InitModule({ print: () => {}, printErr: () => {} });
  const sw = new s3.oo1.DB(':memory:');
  sw.exec('create table p (id integer primary key, name text, city text, age int, score real)');
  const swIns = sw.prepare('insert into p (name, city, age, score) values (?, ?, ?, ?)');
  sw.exec('begin');
  for (const d of docs) swIns.bind([d.name, d.city, d.age, d.score]).stepReset();
  sw.exec('commit');
  swIns.finalize();

  const engines = [
    ['kitfox', (q) => { const st = kf.prepare(q[1]); return () => st.query(q[2]); }],
    ['better-sqlite3', (q) => { const st = bs.prepare(q[3]); return () => st.all(...q[4]); }],
    ['SQLite WASM', (q) => {
      return () => sw.exec({ sql: q[3], bind: q[4].length ? q[4] : undefined, rowMode: 'object', returnValue: 'resultRows' });
    }],
  ];
  const median = (a) => { const s = a.slice(2).sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
  const results = [];
  for (const q of QUERIES) {
    const runs = engines.map((e) => ({ name: e[0], run: e[1](q), ms: [], answer: null }));
    for (let i = 0; i < RUNS; i++) {
      for (const e of runs) {
        const t = performance.now();
        const rows = e.run();
        e.ms.push(performance.now() - t);
        const a = canon(rows);
        if (e.answer === null) e.answer = a;
        else if (e.answer !== a) throw new Error(`${e.name} answered '${q[0]}' differently on run ${i + 1}`);
      }
    }
    for (const e of runs.slice(1))
      if (e.answer !== runs[0].answer)
        throw new Error(`'${q[0]}': kitfox answered ${runs[0].answer}, ${e.name} ${e.answer}`);
    results.push({ q, ms: runs.map((e) => median(e.ms)) });
  }
  kf.close();
  bs.close();
  sw.close();
  fs.rmSync(dir, { recursive: true, force: true });

  const f = (ms) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
  const lines = [];
  lines.push(`### Node: scans, aggregates and sorts with no index (kitfox WASM vs better-sqlite3 and SQLite WASM)`, '');
  lines.push(`${ROWS.toLocaleString('en-US')} documents \`{name, city, age, score}\` (1,000 cities, distinct names), ` +
    `no index on either side; kitfox's WASM module on a file, better-sqlite3 on a file (WAL), SQLite WASM in memory, ` +
    `one Node ${process.version} process, load average ${os.loadavg()[0].toFixed(2)}. Each query ${RUNS} times on each engine in turn, ` +
    'the first two untimed, the median of the rest; the three answers compared every time. ' +
    '`node bench/node/scans.js' + (quick ? ' --quick' : '') + '`.', '');
  lines.push('| query | kitfox | better-sqlite3 | SQLite WASM | kitfox / better-sqlite3 | kitfox / SQLite WASM |');
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const { q, ms } of results)
    lines.push(`| ${q[0]}<br>\`${q[1]}\` | ${f(ms[0])} ms | ${f(ms[1])} ms | ${f(ms[2])} ms | ` +
      `${(ms[0] / ms[1]).toFixed(2)} | ${(ms[0] / ms[2]).toFixed(2)} |`);
  const report = lines.join('\n');
  console.log(report);
  const out = val('out', '');
  if (out) fs.writeFileSync(out, report + '\n');
  const append = val('append', '');
  if (append) fs.appendFileSync(append, '\n' + report + '\n');
}

main().catch((e) => {
  fs.rmSync(dir, { recursive: true, force: true });
  console.error(`scans.js: ${e.message}`);
  process.exit(1);
});
