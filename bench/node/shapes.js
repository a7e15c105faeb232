// Two query shapes over one small app-like collection, kitfox (WASM, in
// Node) against better-sqlite3 in the same run:
//
//   docs {title @text, category @hash, year, embed vector<128> @hnsw}
//   20,000 documents; 16 categories, each one cluster of the vectors.
//
//   1. `get docs select category, count(*) group category` (SQLite: `select
//      category, count(*) from docs group by category` with an index on
//      category);
//      and `group year` with no index on year in either;
//   2. `get docs where category = $2 near embed $1 limit 10` where the
//      category is a cluster far from the query (an anti-correlated
//      filter: its ~1,250 documents are all far away), against the exact
//      answer (`... exact`); kitfox's recall@10 is checked to be 1.
//
//   node bench/node/shapes.js [--docs N] [--runs N] [--out FILE]
//
// Each figure is the median of --runs timed runs (default 21) after one
// untimed run (which builds indexes kitfox builds on first use).
import fs from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';

import Database from 'better-sqlite3';

import { Kitfox } from '../../js/index.js';
import { Clustered } from './clustered.js';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const DOCS = Number(opt('docs', 20000));
const RUNS = Number(opt('runs', 21));
const OUT = opt('out', null);
const DIM = 128;
const CATS = 16;

const gen = new Clustered(DIM, CATS);
const { vectors, clusterOf } = gen.points(DOCS, 1);
const { vectors: qv, clusterOf: qc } = gen.points(1, 999);
const query = qv.subarray(0, DIM);
// The category farthest from the query: its centre has the lowest cosine to it.
let far = 0;
{
  let best = Infinity;
  for (let c = 0; c < CATS; c++) {
    let dot = 0;
    let n = 0;
    let m = 0;
    for (let i = 0; i < DOCS; i++) {
      if (clusterOf[i] !== c) continue;
      const v = vectors.subarray(i * DIM, (i + 1) * DIM);
      for (let d = 0; d < DIM; d++) dot += v[d] * query[d];
      n++;
    }
    m = dot / Math.max(n, 1);
    if (m < best) {
      best = m;
      far = c;
    }
  }
}
const catName = (c) => `cat${c}`;
const farCount = clusterOf.reduce((s, c) => s + (c === far), 0);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function time(fn) {
  fn(); // untimed: first use builds what it builds
  const t = [];
  let out;
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    out = fn();
    t.push(performance.now() - t0);
  }
  return { ms: median(t), out };
}

// kitfox
const db = await Kitfox.open(':memory:');
db.query('create collection docs (title text @text, category text @hash, year int, embed vector<128> @hnsw(cosine, m=16, ef_construction=200))');
const t0 = performance.now();
for (let s = 0; s < DOCS; s += 1000) {
  const batch = [];
  for (let i = s; i < Math.min(DOCS, s + 1000); i++)
    batch.push({ title: `document ${i} about ${catName(clusterOf[i])}`, category: catName(clusterOf[i]), year: 2000 + (i % 25), embed: vectors.subarray(i * DIM, (i + 1) * DIM) });
  db.query('put docs $1', [batch]);
}
const loadMs = performance.now() - t0;
const group = time(() => db.query('get docs select category, count(*) group category'));
const groupYear = time(() => db.query('get docs select year, count(*) group year'));
const near = time(() => db.query('get docs select id where category = $2 near embed $1 limit 10', [query, catName(far)]));
const exact = time(() => db.query('get docs select id where category = $2 near embed $1 exact limit 10', [query, catName(far)]));
const truth = new Set(exact.out.map((r) => r.id));
const recall = near.out.filter((r) => truth.has(r.id)).length / truth.size;
const plan = db.query('explain get docs select id where category = $2 near embed $1 limit 10', [query, catName(far)]).filter((r) => r.op).map((r) => (r.detail ? `${r.op}: ${r.detail}` : r.op));
const groupPlan = db.query('explain get docs select category, count(*) group category').filter((r) => r.op).map((r) => (r.detail ? `${r.op}: ${r.detail}` : r.op));
if (group.out.reduce((s, r) => s + r['count(*)'], 0) !== DOCS) throw new Error('kitfox group counts do not add up');
db.close();

// better-sqlite3
const sq = new Database(':memory:');
sq.exec('create table docs (id integer primary key, title text, category text, year int, embed blob)');
sq.exec('create index docs_category on docs (category)');
const ins = sq.prepare('insert into docs (title, category, year, embed) values (?, ?, ?, ?)');
sq.transaction(() => {
  for (let i = 0; i < DOCS; i++)
    ins.run(`document ${i} about ${catName(clusterOf[i])}`, catName(clusterOf[i]), 2000 + (i % 25), Buffer.from(vectors.buffer, vectors.byteOffset + i * DIM * 4, DIM * 4));
})();
const sqGroupStmt = sq.prepare('select category, count(*) as n from docs group by category');
const sqGroup = time(() => sqGroupStmt.all());
const sqYearStmt = sq.prepare('select year, count(*) as n from docs group by year');
const sqYear = time(() => sqYearStmt.all());
if (sqYear.out.length !== groupYear.out.length) throw new Error('group year: kitfox and SQLite disagree');
for (const r of sqGroup.out) {
  const k = group.out.find((g) => g.category === r.category);
  if (!k || k['count(*)'] !== r.n) throw new Error(`group ${r.category}: kitfox and SQLite disagree`);
}
sq.close();

const f = (ms) => `${ms.toFixed(2)} ms`;
const lines = [
  `node ${process.version}, ${os.cpus()[0].model}, ${os.cpus().length} cores; ${DOCS} documents, ${CATS} categories; median of ${RUNS} runs after one untimed run`,
  '',
  '| query | kitfox (WASM) | better-sqlite3 | kitfox / SQLite |',
  '| --- | ---: | ---: | ---: |',
  `| \`get docs select category, count(*) group category\` (@hash on category; SQLite: an index on it) | ${f(group.ms)} | ${f(sqGroup.ms)} | ${(group.ms / sqGroup.ms).toFixed(2)}x |`,
  `| \`get docs select year, count(*) group year\` (no index on year, in neither) | ${f(groupYear.ms)} | ${f(sqYear.ms)} | ${(groupYear.ms / sqYear.ms).toFixed(2)}x |`,
  `| \`where category = $2 near embed $1 limit 10\`, a category of ${farCount} documents far from the query | ${f(near.ms)} | — | — |`,
  `| the same, \`exact\` | ${f(exact.ms)} | — | — |`,
  '',
  `Filtered near recall@10 against the exact answer: ${recall.toFixed(2)}. Load (put 1,000 a statement, HNSW built as it goes): ${(loadMs / 1000).toFixed(1)} s.`,
  `kitfox plans: group: ${groupPlan.map((s) => `"${s}"`).join(', ')}; filtered near: ${plan.map((s) => `"${s}"`).join(', ')}.`,
];
const text = lines.join('\n') + '\n';
process.stdout.write(text);
if (OUT) fs.writeFileSync(OUT, text);
if (recall < 1) process.exitCode = 1;
