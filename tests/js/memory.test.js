// Memory is given back: opening and closing a database many times does not
// grow the WASM heap after the first few rounds.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';

import { Kitfox } from '../../js/index.js';
import { tempDir } from './helpers.js';

async function cycle(open) {
  const db = await open();
  db.query('create collection if not exists t (name text, n int, v vector<8>)');
  // The same 200 ids every round: a file database keeps its size.
  db.query('put t $1', [Array.from({ length: 200 }, (_, i) => ({ id: i + 1, name: `doc ${i}`.repeat(20), n: i, v: new Float32Array(8).fill(i) }))]);
  db.query('get t where n > 10');
  db.query('get t where n > 10');
  db.checkpoint();
  db.close();
}

for (const [what, open] of [
  ['in memory', () => Kitfox.open(':memory:')],
  ['in a file', (() => {
    const file = path.join(tempDir(), 'cycle.kfdb');
    return () => Kitfox.open(file, { sync: 'off' });
  })()],
]) {
  test(`200 opens and closes ${what} do not grow the heap`, async () => {
    for (let i = 0; i < 5; i++) await cycle(open);
    const after5 = await Kitfox.wasmMemoryBytes();
    for (let i = 5; i < 200; i++) await cycle(open);
    const after200 = await Kitfox.wasmMemoryBytes();
    assert.equal(after200, after5, `the heap grew from ${after5} to ${after200} bytes`);
  });
}
