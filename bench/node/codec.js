// Binary value encoding vs JSON text across the JS/WASM boundary, both ways,
// for the choice recorded in docs/wasm.md and bench/RESULTS.md:
//   rows out: a 1000-row result decoded from the engine's binary encoding
//             (db.query) vs as JSON text + JSON.parse (db.queryJSON);
//   params in: 1000 documents as a binary-encoded param vs JSON text that
//             the engine parses (simdjson), both through `put t $1`.
//
//   node bench/node/codec.js
import { performance } from 'node:perf_hooks';

import { Kitfox } from '../../js/index.js';

const ROWS = 1000;
const REPS = 300;

function docs(withVector) {
  return Array.from({ length: ROWS }, (_, i) => {
    const d = { id: i + 1, name: `user ${i} of the benchmark`, n: i, score: i / 7, tags: ['a', 'b'] };
    if (withVector) d.v = Float32Array.from({ length: 16 }, (_, k) => (i + k) / 100);
    return d;
  });
}

function time(fn) {
  for (let i = 0; i < 30; i++) fn(); // warm up
  const t = performance.now();
  for (let i = 0; i < REPS; i++) fn();
  return ((performance.now() - t) * 1000) / REPS; // µs per call
}

console.log(`node ${process.version}; ${ROWS} rows, mean of ${REPS} calls after warm-up`);
console.log();
console.log('| direction | documents | binary | JSON | JSON / binary |');
console.log('| --- | --- | ---: | ---: | ---: |');
for (const withVector of [false, true]) {
  const what = withVector ? '{id, name, n, score, tags, v: vector<16>}' : '{id, name, n, score, tags}';
  const db = await Kitfox.open(':memory:');
  db.query(`create collection t (name text, n int, score float, tags [text]${withVector ? ', v vector<16>' : ''})`);
  const batch = docs(withVector);
  const json = JSON.stringify([batch.map((d) => (d.v ? { ...d, v: Array.from(d.v) } : d))]);
  const putBin = time(() => db.query('put t $1', [batch]));
  const putJson = time(() => db.query('put t $1', JSON.stringify([batch.map((d) => (d.v ? { ...d, v: Array.from(d.v) } : d))])));
  const putJsonOnly = time(() => db.query('put t $1', json));
  const outBin = time(() => db.query('get t'));
  const outJson = time(() => db.queryJSON('get t').map((l) => JSON.parse(l)));
  const f = (x) => `${(x / 1000).toFixed(2)} ms`;
  console.log(`| params in (put t $1) | ${what} | ${f(putBin)} | ${f(putJson)} (${f(putJsonOnly)} without stringify) | ${(putJson / putBin).toFixed(2)}x |`);
  console.log(`| rows out (get t) | ${what} | ${f(outBin)} | ${f(outJson)} | ${(outJson / outBin).toFixed(2)}x |`);
  db.close();
}
