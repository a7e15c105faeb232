// Databases in files through the Node host: persistence, durability modes,
// damage, and files shared with the native build (the CLI) both ways.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { Kitfox } from '../../js/index.js';
import { cliLines, runCli, tempDir, within } from './helpers.js';

const dir = tempDir();
let n = 0;
const newPath = () => path.join(dir, `db${++n}.kfdb`);

const SCHEMA = 'create collection t (name text, n int, f float, v vector<3>, ts timestamp, b bytes, j json, tags [text])';
const WRITES = [
  'put t {name: "a", n: 1, f: 0.5, v: [1, 2, 3], ts: "2024-06-01T10:00:00Z", b: "aGk=", j: {k: [1, null, "x"]}, tags: ["p", "q"]}',
  'put t [{name: "b", n: 2}, {name: "c", n: -3, f: 1e-7}]',
  'set t {n: 20, j.k2: true} where name = "b"',
  'del t where name = "c"',
  'put t {name: "ü ✓", v: [0.1, 0.2, 0.3]}',
];

describe('persistence', () => {
  test('rows survive a reopen, with the write log replayed', async () => {
    const file = newPath();
    let db = await Kitfox.open(file);
    db.query(SCHEMA);
    for (const w of WRITES) db.query(w);
    const rows = db.queryJSON('get t');
    db.close();
    db = await Kitfox.open(file);
    assert.deepEqual(db.queryJSON('get t'), rows);
    // A small write to a bigger database stays in the tail on close.
    db.query('put t {name: "tail"}');
    const withTail = db.queryJSON('get t');
    db.close();
    db = await Kitfox.open(file);
    assert.equal(db.stats().open.tailRecords, 1);
    assert.deepEqual(db.queryJSON('get t'), withTail);
    db.close();
    assert.deepEqual(fs.readdirSync(dir).filter((f) => f.startsWith(path.basename(file)) && f !== path.basename(file)), []);
  });

  test('every durability mode writes through; checkpoint leaves no side file', async () => {
    for (const sync of ['always', 'off', 10]) {
      const file = newPath();
      const db = await Kitfox.open(file, { sync });
      db.query('create collection t (n int)');
      db.query('put t {n: 1}');
      db.sync();
      db.checkpoint();
      assert.ok(!fs.existsSync(file + '~'));
      db.query('put t {n: 2}');
      db.close(); // flushes in every mode
      const again = await Kitfox.open(file);
      assert.equal(again.query('get t count')[0].count, 2);
      again.close();
    }
  });

  test('in the period mode a timer flushes the last write, with no write after it', async () => {
    // The single-threaded engine flushes in the period mode on a write that
    // comes a period after the last flush; for the last write of a burst,
    // Kitfox sets a timer (js/kitfox.js, _wrote) that calls kfSync, after
    // a write of each kind: a statement, a prepared one, a batch. The test
    // waits for that call (an event, with only a safety bound), not for a
    // guessed time; close() flushes anyway, so the file cannot tell.
    const writes = {
      query: (db) => db.query('put t {n: 1}'),
      prepared: (db) => db.prepare('put t {n: $1}').query([1]),
      batch: (db) => db.batch([['put t {n: 1}']]),
    };
    for (const [way, write] of Object.entries(writes)) {
      const file = newPath();
      const db = await Kitfox.open(file, { sync: 10 });
      const core = db._core;
      const kfSync = core.kfSync;
      let flushed;
      const nextFlush = () => new Promise((resolve) => (flushed = resolve));
      core.kfSync = (h, ...rest) => {
        const rc = kfSync.call(core, h, ...rest);
        if (h === db._h) flushed(rc);
        return rc;
      };
      try {
        let timerRan = nextFlush();
        db.query('create collection t (n int)');
        await within(timerRan, `the period timer never flushed the create (${way})`);
        timerRan = nextFlush();
        write(db);
        const rc = await within(timerRan, `the period timer never flushed after a write by ${way}`);
        assert.ok(rc >= 0, `kfSync from the timer failed (${rc}, ${way})`);
      } finally {
        core.kfSync = kfSync;
      }
      db.close();
      const again = await Kitfox.open(file);
      assert.equal(again.query('get t count')[0].count, 1, way);
      again.close();
    }
  });

  test('create: false refuses a missing file', async () => {
    await assert.rejects(Kitfox.open(path.join(dir, 'missing.kfdb'), { create: false }), { code: 'not_found' });
    assert.ok(!fs.existsSync(path.join(dir, 'missing.kfdb')));
    // Only a boolean says it: 0, 'false' and null created the file as true does.
    for (const create of [0, 'false', null])
      await assert.rejects(Kitfox.open(path.join(dir, 'missing.kfdb'), { create }), { code: 'invalid', message: /create option must be true or false/ });
    assert.ok(!fs.existsSync(path.join(dir, 'missing.kfdb')));
  });

  test('a missing directory is an io error', async () => {
    await assert.rejects(Kitfox.open(path.join(dir, 'no', 'such', 'dir.kfdb')), { code: 'io' });
  });

  test('a torn tail is cut off, damage refuses to open', async () => {
    const file = newPath();
    let db = await Kitfox.open(file);
    db.query('create collection t (n int, s text)');
    // An image big enough that closing keeps the small tail after it.
    db.query('put t $1', [Array.from({ length: 500 }, (_, i) => ({ n: -i, s: 'filler'.repeat(10) }))]);
    db.checkpoint();
    db.query('del t where n <= 0');
    db.query('put t {n: 1}');
    db.query('put t {n: 2}');
    db.close();
    const size = fs.statSync(file).size;
    fs.truncateSync(file, size - 3); // the last write cut short
    db = await Kitfox.open(file);
    assert.ok(db.stats().open.tornBytes > 0);
    assert.deepEqual(db.query('get t select n').map((r) => r.n), [1]);
    db.close();
    // Flip a byte inside the image.
    const bytes = fs.readFileSync(file);
    bytes[40] ^= 0xff;
    fs.writeFileSync(file, bytes);
    await assert.rejects(Kitfox.open(file), { code: 'corrupt', message: /damaged at offset/ });
    // Nothing was changed and the lock was released.
    assert.deepEqual(fs.readFileSync(file), bytes);
    await assert.rejects(Kitfox.open(file), { code: 'corrupt' });
    // recover: as kitfox --recover, the original saved beside the file.
    await assert.rejects(Kitfox.open(file, { recover: 'yes' }), { code: 'invalid', message: /recover option must be true or false/ });
    db = await Kitfox.open(file, { recover: true });
    assert.ok(db.stats().open.recoveredBytes > 0);
    assert.ok(db.stats().open.warnings.some((w) => /saved as '.*\.damaged'/.test(w)));
    db.close();
    assert.deepEqual(fs.readFileSync(`${file}.damaged`), bytes);
    (await Kitfox.open(file)).close(); // whole again
  });

  test('a file path relative to the working directory', async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const db = await Kitfox.open('relative.kfdb');
      db.query('create collection t (n int)');
      db.close();
    } finally {
      process.chdir(cwd);
    }
    assert.ok(fs.existsSync(path.join(dir, 'relative.kfdb')));
  });
});

describe('files shared with the native build', () => {
  test('a file written by the native CLI opens in Node with the same rows', async () => {
    const file = newPath();
    runCli([file, '-c', SCHEMA, ...WRITES.flatMap((w) => ['-c', w])]);
    const native = cliLines([file, '-c', 'get t']);
    assert.equal(native.length, 3);
    const db = await Kitfox.open(file);
    assert.deepEqual(db.queryJSON('get t'), native);
    const [a] = db.query('get t where name = "a"');
    assert.deepEqual(a.v, new Float32Array([1, 2, 3]));
    assert.deepEqual(a.b, new Uint8Array([104, 105]));
    db.query('put t {name: "from node"}');
    db.close();
    assert.deepEqual(cliLines([file, '-c', 'get t select name where name = "from node"']), ['{"id":5,"name":"from node"}']);
  });

  test('a file written by Node opens with the CLI with the same rows', async () => {
    const file = newPath();
    const db = await Kitfox.open(file);
    db.query(SCHEMA);
    for (const w of WRITES) db.query(w);
    db.query('put t {name: "vec", v: $1, j: $2}', [new Float32Array([0.25, -0.5, 1e-3]), { big: 2n ** 62n }]);
    const rows = db.queryJSON('get t');
    db.close();
    assert.deepEqual(cliLines([file, '-c', 'get t']), rows);
  });

  test('the same statements make the same bytes in both builds', async () => {
    const nativeFile = newPath();
    const wasmFile = newPath();
    runCli([nativeFile, '-c', SCHEMA, ...WRITES.flatMap((w) => ['-c', w])]);
    const db = await Kitfox.open(wasmFile);
    db.query(SCHEMA);
    for (const w of WRITES) db.query(w);
    db.close();
    assert.deepEqual(fs.readFileSync(wasmFile), fs.readFileSync(nativeFile));
    // And the exported bytes of a memory database are that file too.
    const mem = await Kitfox.open(':memory:');
    mem.query(SCHEMA);
    for (const w of WRITES) mem.query(w);
    runCli(['checkpoint', nativeFile]);
    assert.deepEqual(Buffer.from(mem.export()), fs.readFileSync(nativeFile));
    mem.close();
  });
});

describe('the same HNSW graph in both builds', () => {
  // Clustered vectors from a fixed linear congruential stream: the same
  // floats on both sides (JSON carries each float's shortest decimal form).
  function vectors(n, dim, seed) {
    let s = seed >>> 0;
    const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296) * 2 - 1;
    const centres = Array.from({ length: 16 }, () => Array.from({ length: dim }, rnd));
    return Array.from({ length: n }, (_, i) => Float32Array.from(centres[i % 16], (c) => c + 0.3 * rnd()));
  }

  test('vectors linked natively on all cores and in WASM give byte-identical files and answers', async () => {
    const dim = 24;
    const vs = vectors(2500, dim, 7);
    const schema = 'create collection v (k int, e vector<24> @hnsw(cosine, m=8, ef_construction=64), h vector<24, f16> @hnsw(l2, m=6, ef_construction=40))';
    const docs = vs.map((v, i) => ({ k: i % 7, e: Array.from(v), h: Array.from(v, (x) => x / 2) }));
    const nativeFile = newPath();
    const wasmFile = newPath();
    const data = path.join(dir, 'vectors.ndjson');
    fs.writeFileSync(data, docs.map((d) => JSON.stringify(d)).join('\n') + '\n');

    runCli([nativeFile, '-c', schema]);
    runCli(['import', nativeFile, 'v', data, '--batch', '500']);
    runCli(['checkpoint', nativeFile]);

    let db = await Kitfox.open(wasmFile);
    db.query(schema);
    db.close();
    db = await Kitfox.open(wasmFile);
    for (let i = 0; i < docs.length; i += 500) {
      const chunk = docs.slice(i, i + 500).map((d) => ({ k: d.k, e: Float32Array.from(d.e), h: Float32Array.from(d.h) }));
      db.query('put v $1', [chunk]);
    }
    db.close();
    db = await Kitfox.open(wasmFile);
    db.checkpoint();
    const q = Array.from(vectors(1, dim, 99)[0]);
    const ann = db.queryJSON('get v select id near e $1 ef 20 limit 10', [Float32Array.from(q)]);
    const annH = db.queryJSON('get v select id near h $1 ef 20 limit 10', [Float32Array.from(q)]);
    db.close();

    const a = fs.readFileSync(nativeFile);
    const b = fs.readFileSync(wasmFile);
    assert.equal(a.length, b.length);
    assert.ok(a.equals(b), 'the native and the WASM file differ');
    assert.deepEqual(cliLines([nativeFile, '--param', JSON.stringify(q), '-c', 'get v select id near e $1 ef 20 limit 10']), ann);
    assert.deepEqual(cliLines([nativeFile, '--param', JSON.stringify(q), '-c', 'get v select id near h $1 ef 20 limit 10']), annH);
  });
});
