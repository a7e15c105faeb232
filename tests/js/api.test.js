// The JS API over an in-memory database: values both ways, errors, and every
// method of a Kitfox object.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Kitfox, KitfoxError } from '../../js/index.js';

async function fresh() {
  const db = await Kitfox.open(':memory:');
  db.query('create collection t (name text, n int, f float, v vector<3>, ts timestamp, b bytes, j json, tags [text])');
  return db;
}

function count(db, c = 't') {
  return db.query(`get ${c} count`)[0].count;
}

describe('values', () => {
  test('every type goes in and comes back', async () => {
    const db = await fresh();
    const doc = {
      name: 'héllo wörld ✓ 𝄞',
      n: -42,
      f: 1.25,
      v: new Float32Array([0.5, -1, 3.25]),
      ts: new Date('2024-06-01T10:00:00.250Z'),
      b: new Uint8Array([0, 1, 254, 255]),
      j: { a: [1, null, { b: 'x' }], t: true, f: 2.5, s: 'str' },
      tags: ['a', 'b'],
    };
    assert.deepEqual(db.query('put t $1', [doc]), [{ id: 1 }]);
    const [row] = db.query('get t');
    assert.deepEqual(row, { id: 1, ...doc });
    assert.ok(row.v instanceof Float32Array);
    assert.ok(row.ts instanceof Date);
    assert.ok(row.b instanceof Uint8Array);
    assert.deepEqual(Object.keys(row), ['id', 'name', 'n', 'f', 'v', 'ts', 'b', 'j', 'tags']);
    db.close();
  });

  test('fields as separate params, number arrays as vectors, text as timestamps', async () => {
    const db = await fresh();
    db.query('put t {name: $1, v: $2, ts: $3, f: $4}', ['x', [1, 2, 3], '2024-01-02', 3]);
    const [row] = db.query('get t');
    assert.deepEqual(row.v, new Float32Array([1, 2, 3]));
    assert.equal(row.ts.toISOString(), '2024-01-02T00:00:00.000Z');
    assert.equal(row.f, 3);
    db.close();
  });

  test('64-bit integers: numbers up to 2^53, BigInt beyond', async () => {
    const db = await fresh();
    const values = [0, 1, -1, 2 ** 53 - 1, -(2 ** 53 - 1), 2n ** 53n, 2n ** 63n - 1n, -(2n ** 63n), 123456789012345678n];
    for (const n of values) db.query('put t {n: $1}', [n]);
    const got = db.query('get t select n').map((r) => r.n);
    assert.deepEqual(got, values.map((v) => (typeof v === 'bigint' && v >= -(2n ** 53n - 1n) && v <= 2n ** 53n - 1n ? Number(v) : v)));
    assert.equal(typeof got[3], 'number');
    assert.equal(typeof got[5], 'bigint');
    // A json field keeps them too.
    db.query('put t {j: $1}', [{ big: 2n ** 60n, small: 7n }]);
    assert.deepEqual(db.query('get t select j order id desc limit 1')[0].j, { big: 2n ** 60n, small: 7 });
    db.close();
  });

  test('ints compare with ints in where, floats stay floats', async () => {
    const db = await fresh();
    db.query('put t [{n: 1}, {n: 2}, {n: 3}]');
    assert.deepEqual(db.query('get t select n where n > $1', [1]).map((r) => r.n), [2, 3]);
    assert.deepEqual(db.query('get t select n where n > $1', [1.5]).map((r) => r.n), [2, 3]);
    assert.deepEqual(db.query('get t select n where n in $1', [[1, 3n]]).map((r) => r.n), [1, 3]);
    db.close();
  });

  test('text and keys come back whole: a leading U+FEFF, long and short, rows of other shapes', async () => {
    const db = await fresh();
    const long = '\uFEFF' + 'x'.repeat(40) + ' é';
    db.query('put t {name: $1, j: $2}', ['\uFEFFabc', { '\uFEFFk': long, k: 'short' }]);
    db.query('put t {j: $1}', [{ other: 1, k: 2 }]);
    const rows = db.query('get t select name, j');
    assert.deepEqual(rows, [
      { id: 1, name: '\uFEFFabc', j: { '\uFEFFk': long, k: 'short' } },
      { id: 2, name: null, j: { other: 1, k: 2 } },
    ]);
    db.close();
  });

  test('__proto__ as a json key is data, not a prototype', async () => {
    const db = await fresh();
    db.query('put t {j: {"__proto__": {polluted: 1}}}');
    const [row] = db.query('get t select j');
    assert.equal(Object.getPrototypeOf(row.j), Object.prototype);
    assert.deepEqual(Object.keys(row.j), ['__proto__']);
    assert.equal(({}).polluted, undefined);
    db.close();
  });
});

// A half's value, for reference.
function halfValue(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

describe('f16 vectors', () => {
  test('every finite half value reads back exactly; distances over f16 equal those over the same f32 values', async () => {
    const db = await Kitfox.open(':memory:');
    db.query('create collection h (v vector<1024, f16> @hnsw(dot, m=4, ef_construction=16))');
    db.query('create collection f (v vector<1024> @hnsw(dot, m=4, ef_construction=16))');
    const halves = [];
    for (let h = 0; h < 0x10000; h++) if ((h & 0x7c00) !== 0x7c00) halves.push(h);
    assert.equal(halves.length, 62 * 1024);
    const docs = [];
    for (let d = 0; d < 62; d++) docs.push({ v: Float32Array.from(halves.slice(d * 1024, (d + 1) * 1024), halfValue) });
    db.query('put h $1', [docs]);
    db.query('put f $1', [docs]);
    const back = db.query('get h select v');
    assert.equal(back.length, 62);
    for (let d = 0; d < 62; d++) {
      const got = back[d].v;
      for (let i = 0; i < 1024; i++) {
        if (!Object.is(got[i], docs[d].v[i])) assert.fail(`half 0x${halves[d * 1024 + i].toString(16)}: read ${got[i]}, expected ${docs[d].v[i]}`);
      }
    }
    const q = Float32Array.from({ length: 1024 }, (_, i) => (((i * 37) % 17) - 8) / 8);
    const near = (c) => db.query(`get ${c} select id near v $1 exact limit 62`, [q]).map((r) => [r.id, r._distance]);
    const viaHalf = near('h');
    assert.equal(viaHalf.length, 62);
    assert.deepEqual(viaHalf, near('f'));
    db.close();
  });
});

describe('errors', () => {
  test('KitfoxError carries code, message and position', async () => {
    const db = await fresh();
    assert.throws(
      () => db.query('get t where'),
      (err) => {
        assert.ok(err instanceof KitfoxError);
        assert.ok(err instanceof Error);
        assert.equal(err.name, 'KitfoxError');
        assert.equal(err.code, 'syntax');
        assert.equal(err.position, 11);
        assert.match(err.message, /^syntax error at 11: /);
        return true;
      },
    );
    assert.throws(() => db.query('get nope'), { name: 'KitfoxError', code: 'not_found' });
    assert.throws(() => db.query('put t {n: "x"}'), { code: 'type' });
    db.close();
  });

  test('bad parameters are refused and change nothing', async () => {
    const db = await fresh();
    db.query('put t {name: "keep"}');
    const bad = [
      [() => 1],
      [Symbol('s')],
      [new Map()],
      [new (class Foo {})()],
      [{ nested: new Set() }],
      [new Date(NaN)],
      [2n ** 63n],
      [new Int32Array(3)],
      ['lone \uD800 surrogate'],
      ['\uDC00'],
      [{ ['key \uDBFF']: 1 }],
      [new Date(8.64e15 + 1)],
    ];
    for (const params of bad) {
      assert.throws(() => db.query('put t {j: $1}', params), (e) => e instanceof KitfoxError && e.code === 'type', String(params[0]));
    }
    let deep = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    assert.throws(() => db.query('put t {j: $1}', [deep]), { code: 'limit' });
    // 64 levels, as the CLI's --param takes them, through query and batch
    // alike (query refused 64 as "malformed parameters", batch 62 as too
    // deep); 65 are refused as a limit, naming the parameter.
    const nested = (levels) => {
      let v = 1;
      for (let i = 0; i < levels; i++) v = [v];
      return v;
    };
    const [{ id: deepId }] = db.query('put t {j: $1}', [nested(64)]);
    db.batch([['put t {j: $1}', [nested(64)]]]);
    assert.throws(() => db.query('put t {j: $1}', [nested(65)]), { code: 'limit', message: /parameter \$1.*nested deeper than 64 levels/ });
    assert.throws(() => db.batch([['put t {j: $1}', [nested(65)]]]), { code: 'limit', message: /batch entry 1: parameter \$1/ });
    db.query('del t where id >= $1', [deepId]);
    // A getter of a value that runs a statement is refused; the outer
    // statement keeps its own values (it ran with the inner call's before).
    let inner = null;
    const sly = {
      x: 1,
      get y() {
        try {
          db.query('get t where n = $1', [5, Symbol('bad')]);
        } catch (e) {
          inner = e;
        }
        return 'Y';
      },
    };
    const [{ id: slyId }] = db.query('put t {n: $1, j: $2}', [7, sly]);
    assert.equal(inner?.code, 'invalid');
    assert.match(inner.message, /values must not run statements/);
    assert.deepEqual(db.query('get t select n, j where id = $1', [slyId]), [{ id: slyId, n: 7, j: { x: 1, y: 'Y' } }]);
    db.query('del t where id = $1', [slyId]);
    // The params are checked before the statement (a short text is run as a
    // kept prepared statement, and still reports as the text did).
    assert.throws(() => db.query('get t wher', [() => 1]), { code: 'type' });
    assert.throws(() => db.query('get nosuch', { not: 'an array' }), { code: 'invalid' });
    assert.throws(() => db.query('put t {n: $1}', ['x']), { code: 'type' });
    assert.throws(() => db.query('put t {n: $2}', [1]), KitfoxError);
    assert.throws(() => db.query('put t $1', ['not a document']), KitfoxError);
    assert.throws(() => db.query('put t $1', [[{ n: 1 }, { n: 'x' }]]), { code: 'type' });
    assert.throws(() => db.query('put t', 'not an array'), { code: 'json' });
    assert.throws(() => db.query('put t {n: 1}', { not: 'an array' }), { code: 'invalid' });
    assert.throws(() => db.query(42), { code: 'invalid' });
    // The same refusals as in statement text.
    assert.throws(() => db.query('put t {name: "\\uD800"}'), { code: 'syntax' });
    assert.throws(() => db.query('put t {name: "\uD800"}'), { code: 'syntax' });
    // Timestamps the JS Date cannot hold are refused on the way in, from any side.
    assert.throws(() => db.query('put t {ts: $1}', [8.64e15 + 1]), { code: 'type' });
    assert.throws(() => db.query('put t {ts: -8640000000000001}'), { code: 'type' });
    db.query('put t {ts: $1}', [8.64e15]);
    const [{ ts }] = db.query('get t select ts where ts is not null');
    assert.equal(ts.getTime(), 8.64e15);
    db.query('del t where ts is not null');
    // Well-formed text beyond ASCII and pairs of surrogates go through.
    db.query('put t {name: $1}', ['pair 𝄞 é']);
    assert.equal(db.query('get t where name = "pair 𝄞 é" count')[0].count, 1);
    db.query('del t where name = "pair 𝄞 é"');
    assert.deepEqual(db.query('get t select name'), [{ id: 1, name: 'keep' }]);
    db.close();
  });

  test('NaN and infinities are refused in vectors and floats', async () => {
    const db = await fresh();
    assert.throws(() => db.query('put t {v: $1}', [new Float32Array([1, NaN, 2])]), { code: 'type' });
    assert.throws(() => db.query('put t {v: $1}', [new Float32Array([1, Infinity, 2])]), { code: 'type' });
    assert.throws(() => db.query('put t {f: $1}', [NaN]), { code: 'type' });
    assert.throws(() => db.query('put t {v: $1}', [new Float32Array([1, 2])]), { code: 'type' });
    // Inside a json field the error names where: 'j.a.b', 'j.list[1]'.
    assert.throws(() => db.query('put t {j: $1}', [{ a: { b: NaN } }]), { code: 'type', message: /'j\.a\.b' must be a finite number/ });
    assert.throws(() => db.query('put t {j: $1}', [{ list: [1, -Infinity] }]), { code: 'type', message: /'j\.list\[1\]' must be a finite number/ });
    assert.equal(count(db), 0);
    db.close();
  });

  test('long and / or chains run (no stack overflow), and the handle works after', async () => {
    const db = await fresh();
    db.query('insert t [{n: 1}, {n: 2}, {n: 3}]');
    for (const op of [' and ', ' or ']) {
      const terms = ['n > 0'];
      for (let i = 1; i < 30000; i++) terms.push(op === ' and ' ? `n > -${i}` : `n = ${i + 2}`);
      const rows = db.query(`get t select n where ${terms.join(op)}`);
      assert.deepEqual(rows.map((r) => r.n), [1, 2, 3]);
    }
    // Too deep a nesting is a KitfoxError, and the handle goes on working.
    const deep = '('.repeat(100) + 'n = 1' + ')'.repeat(100);
    assert.throws(() => db.query(`get t where ${deep}`), (e) => e instanceof KitfoxError && e.code === 'limit');
    db.query('put t {n: 4}');
    assert.equal(count(db), 4);
    db.close();
  });

  test('a failed write statement writes nothing', async () => {
    const db = await fresh();
    db.query('put t {id: 5, name: "a"}');
    assert.throws(() => db.query('insert t [{id: 6}, {id: 5}]'), { code: 'exists' });
    assert.deepEqual(db.query('get t select name'), [{ id: 5, name: 'a' }]);
    db.close();
  });
});

describe('methods', () => {
  test('queryJSON gives the native JSON text; params may be JSON text', async () => {
    const db = await fresh();
    db.query('put t {name: "a", f: 2, ts: 0, b: $1, v: [0.1, 2, 3]}', [new Uint8Array([104, 105])]);
    assert.deepEqual(db.queryJSON('get t'), [
      '{"id":1,"name":"a","f":2.0,"v":[0.1,2,3],"ts":"1970-01-01T00:00:00.000Z","b":"aGk="}',
    ]);
    assert.deepEqual(db.queryJSON('get t select name where f = $1', '[2.0]'), ['{"id":1,"name":"a"}']);
    assert.deepEqual(db.queryJSON('get t where id = 7'), []);
    db.close();
  });

  test("a batch's parameters make the documents a query's make, of every kind", async () => {
    const db = await fresh();
    db.query('create collection u (name text, n int, f float, v vector<3>, ts timestamp, b bytes, j json, tags [text])');
    const put = 'put C {name: $1, n: $2, f: $3, v: $4, ts: $5, b: $6, j: $7, tags: $8}';
    const rows = [
      ['a', 1, 1.5, new Float32Array([1, 2, 3]), new Date(86400000), new Uint8Array([0, 255]), { x: [1, null, 'y'] }, ['p', 'q']],
      ['b', -7, 2, [0.5, -1, 1e-3], null, null, [1, 2.5, { z: true }], []],
      [null, 2 ** 40, -0, [4, 5, 6], new Date(0), new Uint8Array([]), 'text', null],
    ];
    // Into t by one batch, into u by one query a row; then a read and a write by id in the batch too.
    const out = db.batch([...rows.map((r) => [put.replace('C', 't'), r]), ['put t $1', [[{ n: 9, v: [7, 8, 9] }]]],
      ['get t where n >= $1 select n', [2]], ['set t {name: $1} where id = $2', ['set', 2]]]);
    // A text over 1 KiB is not kept prepared: its parameters are decoded into values (kfQuery).
    const pad = ' '.repeat(1100);
    for (const r of rows) db.query(put.replace('C', 'u') + pad, r);
    db.query('put u $1' + pad, [[{ n: 9, v: [7, 8, 9] }]]);
    db.query('set u {name: $1} where id = $2', ['set', 2]);
    assert.deepEqual(out.slice(0, 4), [[{ id: 1 }], [{ id: 2 }], [{ id: 3 }], [{ id: 4 }]]);
    assert.deepEqual(out[4], [{ id: 3, n: 2 ** 40 }, { id: 4, n: 9 }]);
    assert.deepEqual(db.query('get t'), db.query('get u'));
    // What each kind became (the puts' parameters spliced from their encoding, both ways).
    const got = db.query('get t');
    assert.deepEqual(got[0], { id: 1, name: 'a', n: 1, f: 1.5, v: new Float32Array([1, 2, 3]), ts: new Date(86400000),
      b: new Uint8Array([0, 255]), j: { x: [1, null, 'y'] }, tags: ['p', 'q'] });
    assert.deepEqual(got[1], { id: 2, name: 'set', n: -7, f: 2, v: new Float32Array([0.5, -1, 1e-3]), j: [1, 2.5, { z: true }], tags: [] });
    assert.deepEqual(got[2], { id: 3, n: 2 ** 40, f: 0, v: new Float32Array([4, 5, 6]), ts: new Date(0), b: new Uint8Array([]), j: 'text' });
    assert.deepEqual(got[3], { id: 4, n: 9, v: new Float32Array([7, 8, 9]) });
    // A parameter's error names the statement; nothing lands.
    assert.throws(() => db.batch([['put t {n: 1}'], ['put t {v: $1}', [[1, 2]]]]), { code: 'type', message: /statement 2/ });
    // A value no parameter can be, named by its entry and its parameter's path.
    assert.throws(() => db.batch([['put t {n: 1}'], ['put t {n: $1, j: $2}', [1, { a: [new Map()] }]]]), {
      code: 'type',
      message: /^type error: batch entry 2: parameter \$2\.a\[0\]: a Map cannot be stored/,
    });
    assert.throws(() => db.batch([['put t {n: 1}'], ['\ud800']]), { code: 'type', message: /^type error: batch entry 2: the statement text: a string with an unpaired/ });
    assert.equal(count(db), 4);
    db.close();
  });

  test('batch is atomic: each statement sees the ones before, a failure changes nothing', async () => {
    const db = await fresh();
    const out = db.batch([['put t {n: $1}', [1]], ['put t {n: 2}'], ['get t where n >= $1 count', [1]], ['del t where n = 2']]);
    assert.equal(out.length, 4);
    assert.deepEqual(out[0], [{ id: 1 }]);
    assert.deepEqual(out[2], [{ count: 2 }]);
    assert.deepEqual(out[3], [{ deleted: 1 }]);
    assert.equal(count(db), 1);
    assert.throws(() => db.batch([['put t {n: 3}'], ['insert t {id: 1, n: 4}']]), { code: 'exists', message: /statement 2/ });
    assert.equal(count(db), 1);
    assert.throws(() => db.batch([['put t {n: 3}'], ['get t where']]), { code: 'syntax', message: /statement 2/ });
    assert.throws(() => db.batch('put t {n: 1}'), { code: 'invalid' });
    assert.equal(count(db), 1);
    db.close();
  });

  test('prepare: parsed once, run with new params, bound again after alter; finalize', async () => {
    const db = await fresh();
    const put = db.prepare('put t {name: $1, n: $2}');
    assert.equal(put.text, 'put t {name: $1, n: $2}');
    for (let i = 1; i <= 4; i++) assert.deepEqual(put.query([`d${i}`, i * 10]), [{ id: i }]);
    const get = db.prepare('get t select name where id = $1');
    assert.deepEqual(get.query([3]), [{ id: 3, name: 'd3' }]);
    assert.deepEqual(get.queryJSON([2]), ['{"id":2,"name":"d2"}']);
    assert.deepEqual(get.query([99]), []);
    // Wrong parameters: a clear error, nothing written, the statement still works.
    assert.throws(() => put.query([1, 2]), { code: 'type' });
    assert.throws(() => put.query(['x']), { code: 'invalid', message: /parameter \$2 was not given/ });
    assert.equal(count(db), 4);
    // The schema changes under it.
    db.query('alter collection t rename name to title');
    assert.throws(() => get.query([1]), { code: 'not_found', message: /unknown field 'name'/ });
    db.query('alter collection t rename title to name');
    assert.deepEqual(get.query([1]), [{ id: 1, name: 'd1' }]);
    // Errors at prepare: syntax and unknown names.
    assert.throws(() => db.prepare('get t where'), { code: 'syntax' });
    assert.throws(() => db.prepare('get nope'), { code: 'not_found' });
    assert.throws(() => db.prepare(42), { code: 'invalid' });
    get.finalize();
    get.finalize(); // twice is fine
    assert.throws(() => get.query([1]), { code: 'invalid', message: /finalized/ });
    db.close();
    assert.throws(() => put.query(['z', 1]), { code: 'invalid', message: /closed/ });
  });

  test('transactions: begin/commit/rollback as statements; reads see the queued writes', async () => {
    const db = await fresh();
    db.query('put t {n: 1}');
    const count1 = db.prepare('get t where n >= 1 count');
    db.query('BEGIN;');
    assert.deepEqual(db.query('put t {n: 2}'), [{ queued: 1 }]);
    assert.deepEqual(db.query('set t {n: 5} where n = 1'), [{ queued: 2 }]);
    assert.deepEqual(count1.query(), [{ count: 2 }]);
    assert.deepEqual(db.query('get t select n').map((r) => r.n), [5, 2]);
    assert.throws(() => db.query('create collection u (x int)'), { code: 'invalid', message: /part of a transaction/ });
    // A batch would land at once, outside the transaction: refused.
    assert.throws(() => db.batch([['put t {n: 9}']]), { code: 'invalid', message: /batch cannot run inside a transaction/ });
    db.query('rollback');
    assert.deepEqual(db.query('get t select n').map((r) => r.n), [1]);
    db.query('begin');
    db.query('put t {n: 3}');
    assert.deepEqual(db.query('commit'), [{ id: 2 }]);
    assert.deepEqual(count1.query(), [{ count: 2 }]);
    assert.throws(() => db.query('commit'), { code: 'invalid', message: /no transaction is open/ });
    db.close();
  });


  test('a put of documents given as a parameter: typed from their encoding; a transaction keeps a copy', async () => {
    // The binding leaves a put's `$1` in its encoding (no values built).
    const db = await fresh();
    const put = db.prepare('put t $1');
    assert.deepEqual(put.query([[{ name: 'a', n: 1, v: new Float32Array([1, 2, 3]), tags: ['x'] }, { n: 2, j: { k: [1] } }]]), [{ id: 1 }, { id: 2 }]);
    assert.deepEqual(db.query('insert t $1', [{ name: 'c', n: 3, ts: new Date(5), b: new Uint8Array([7]), id: 9 }]), [{ id: 9 }]);
    assert.deepEqual(put.query([[{ n: 4, f: 2, v: [0.5, 1, 2], name: null }]]), [{ id: 10 }]);
    const rows = db.query('get t');
    assert.deepEqual(rows[0], { id: 1, name: 'a', n: 1, v: new Float32Array([1, 2, 3]), tags: ['x'] });
    assert.deepEqual(rows[1], { id: 2, n: 2, j: { k: [1] } });
    assert.deepEqual(rows[2], { id: 9, name: 'c', n: 3, ts: new Date(5), b: new Uint8Array([7]) });
    assert.deepEqual(rows[3], { id: 10, n: 4, f: 2, v: new Float32Array([0.5, 1, 2]) });
    // Errors name the document by its number, and nothing lands.
    assert.throws(() => put.query([[{ n: 5 }, { n: 'six' }]]), { code: 'type', message: /document 2/ });
    assert.throws(() => put.query([7]), { code: 'type', message: /expected a document/ });
    assert.throws(() => put.query([[{ nope: 1 }]]), { code: 'not_found', message: /nope/ });
    assert.equal(count(db), 4);
    // Inside a transaction the put is queued with a copy of its documents:
    // the next call writes over the module's input.
    db.query('begin');
    assert.deepEqual(put.query([[{ n: 11 }, { n: 12 }]]), [{ queued: 1 }]);
    assert.deepEqual(put.query([[{ n: 13 }]]), [{ queued: 2 }]);
    assert.deepEqual(db.query('get t where n > 10 select n').map((r) => r.n), [11, 12, 13]);
    assert.deepEqual(db.query('commit'), [{ id: 11 }, { id: 12 }, { id: 13 }]);
    assert.deepEqual(db.query('get t where n > 10 select n').map((r) => r.n), [11, 12, 13]);
    db.close();
  });

  test("a put's documents holding a vector reference (tag 12, a stored document's own) are malformed", async () => {
    const db = await fresh();
    const put = db.prepare('put t $1');
    const core = db._core;
    // The params as the wrapper would send them, but for the tag JS never
    // writes: [[{n: <vector reference to node 0>}]].
    const bytes = Uint8Array.from([8, 1, 8, 1, 9, 1, 1, 110, 12, 0]);
    const ptr = core.kfInput(bytes.length) >>> 0;
    core.HEAPU8.set(bytes, ptr);
    assert.equal(core.kfRun(db._h, put._st, bytes.length, 0), -1);
    assert.match(core.kfLastError().message, /malformed parameters/);
    assert.equal(count(db), 0);
    db.close();
  });

  test('a text whose length is past 2^32 is malformed in the 32-bit build too, not read as its low bits', async () => {
    const db = await fresh();
    const core = db._core;
    // varint(2^32 + 2) then 'ab': the low 32 bits of the length (2) fit the bytes.
    const long = [0x82, 0x80, 0x80, 0x80, 0x10];
    const send = (bytes) => {
      const ptr = core.kfInput(bytes.length) >>> 0;
      core.HEAPU8.set(bytes, ptr);
    };
    const param = [8, 1, 5, ...long, 97, 98]; // [text of 2^32 + 2 bytes]
    for (const q of ['put t {name: $1}', 'get t where name = $1']) {
      const st = db.prepare(q);
      send(Uint8Array.from(param));
      assert.equal(core.kfRun(db._h, st._st, param.length, 0), -1, q);
      assert.match(core.kfLastError().message, /malformed parameters/, q);
    }
    // A batch entry's statement text with that length: [[text]].
    const text = new TextEncoder().encode('put t {n: 1}');
    const entry = [0x8c, 0x80, 0x80, 0x80, 0x10]; // varint(2^32 + 12)
    const batch = Uint8Array.from([8, 1, 8, 1, 5, ...entry, ...text]);
    send(batch);
    assert.equal(core.kfBatch(db._h, batch.length), -1);
    assert.match(core.kfLastError().message, /batch/);
    assert.equal(count(db), 0);
    db.close();
  });

  test('near keeps prepared statements: many shapes of call, each answered right', async () => {
    const db = await Kitfox.open(':memory:');
    db.query('create collection docs (k int, embed vector<2>)');
    const docs = [];
    for (let i = 0; i < 40; i++) docs.push({ k: i, embed: [Math.cos(i / 7), Math.sin(i / 7)] });
    db.query('put docs $1', [docs]);
    // More shapes than near() keeps: old ones leave, every call is still right.
    for (let round = 0; round < 2; round++)
      for (let limit = 1; limit <= 24; limit++) {
        const rows = db.near('docs', 'embed', [1, 0], { limit, exact: true, select: ['k'] });
        assert.equal(rows.length, limit);
        assert.equal(rows[0].k, 0);
      }
    db.close();
  });

  test('near builds its statement and checks its arguments', async () => {
    const db = await Kitfox.open(':memory:');
    db.query('create collection docs (title text, year int, embed vector<3>)');
    assert.throws(() => db.near('docs; drop', 'embed', [1, 0, 0]), { code: 'invalid' });
    assert.throws(() => db.near('docs', 'embed', 'nope'), { code: 'type' });
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], { limit: -1 }), { code: 'invalid' });
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], { select: ['title) x'] }), { code: 'invalid' });
    // KitfoxErrors, not TypeErrors: options of null, a hole in a batch.
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], null), { code: 'invalid', message: /near options must be an object/ });
    // Options as given: a string is named as one, "false" is no boolean,
    // and a misspelt key is refused (it was ignored).
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], { limit: '5' }), { code: 'invalid', message: /limit must be a non-negative integer, got "5"/ });
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], { exact: 'false' }), { code: 'invalid', message: /exact must be true or false, got "false"/ });
    assert.throws(() => db.near('docs', 'embed', [1, 0, 0], { limt: 3 }), { code: 'invalid', message: /unknown near option 'limt'/ });
    assert.throws(() => db.near('docs', 'embed', [1, -1e39, 0]), { code: 'type', message: /vector\[1\]: -1e\+39 is beyond a float32's range/ });
    assert.throws(() => db.batch([, ['get docs']]), { code: 'invalid', message: /batch entry 1: a statement must be a string/ });
    db.close();
  });

  test('near finds neighbours', async () => {
    const db = await Kitfox.open(':memory:');
    db.query('create collection docs (title text, year int, embed vector<3>)');
    db.query('put docs $1', [
      [
        { title: 'x', year: 2020, embed: [1, 0, 0] },
        { title: 'y', year: 2024, embed: [0, 1, 0] },
        { title: 'z', year: 2024, embed: [0.9, 0.1, 0] },
      ],
    ]);
    const rows = db.near('docs', 'embed', new Float32Array([1, 0, 0]), { limit: 2, select: ['title'], exact: true });
    assert.deepEqual(rows.map((r) => r.title), ['x', 'z']);
    const filtered = db.near('docs', 'embed', [1, 0, 0], { limit: 1, where: 'year > $1', params: [2021] });
    assert.equal(filtered[0].title, 'z');
    // A comment at the end of `where` ends with it: near and limit still apply.
    const commented = db.near('docs', 'embed', [1, 0, 0], { limit: 1, where: 'year > $1 -- only the recent', params: [2021] });
    assert.deepEqual(commented.map((r) => [r.title, typeof r._distance]), [['z', 'number']]);
    db.close();
  });

  test('checkpoint, sync, stats', async () => {
    const db = await fresh();
    db.query('put t {name: "a"}');
    const before = db.stats();
    assert.equal(before.tailRecords, 2);
    assert.deepEqual(before.collections, [{ name: 't', documents: 1, bytes: before.collections[0].bytes }]);
    assert.ok(before.wasmMemoryBytes >= 16 << 20);
    assert.equal(before.open.tornBytes, 0);
    db.checkpoint();
    db.sync();
    const after = db.stats();
    assert.equal(after.tailRecords, 0);
    assert.equal(after.tailBytes, 0);
    assert.equal(after.fileBytes, after.imageBytes);
    db.query('checkpoint');
    db.close();
  });

  test('export gives bytes that open again, and the source array is not touched', async () => {
    const db = await fresh();
    db.query('put t [{name: "a"}, {name: "b", v: [1, 2, 3]}]');
    const bytes = db.export();
    assert.ok(bytes instanceof Uint8Array);
    assert.equal(new TextDecoder().decode(bytes.subarray(0, 8)), 'KITFOXDB');
    db.close();
    const copy = bytes.slice();
    const again = await Kitfox.open(bytes);
    assert.deepEqual(again.query('get t select name').map((r) => r.name), ['a', 'b']);
    again.query('put t {name: "c"}');
    again.checkpoint();
    assert.deepEqual(bytes, copy);
    const third = await Kitfox.open(again.export().buffer);
    assert.equal(count(third), 3);
    third.close();
    again.close();
  });

  test('close: twice is fine, use after close is an error', async () => {
    const db = await fresh();
    assert.equal(db.closed, false);
    db.close();
    db.close();
    assert.equal(db.closed, true);
    assert.throws(() => db.query('get t'), { code: 'invalid', message: /closed/ });
    assert.throws(() => db.stats(), { code: 'invalid' });
    assert.throws(() => db.export(), { code: 'invalid' });
  });

  test('open options are checked', async () => {
    await assert.rejects(Kitfox.open(':memory:', { sync: 'sometimes' }), { code: 'invalid' });
    await assert.rejects(Kitfox.open(':memory:', { sync: -5 }), { code: 'invalid' });
    await assert.rejects(Kitfox.open(42), { code: 'invalid' });
    await assert.rejects(Kitfox.open(new Uint8Array([1, 2, 3])), { code: 'corrupt' });
    for (const sync of ['always', 'off', 100, '250ms']) (await Kitfox.open(':memory:', { sync })).close();
    assert.equal(Kitfox.platform, 'node');
  });

  test('databases are independent', async () => {
    const a = await Kitfox.open(':memory:');
    const b = await Kitfox.open(':memory:');
    a.query('create collection t (n int)');
    assert.throws(() => b.query('get t'), { code: 'not_found' });
    a.close();
    b.close();
  });
});

describe('a trap in the module', () => {
  test('gives the module up: every database in it refuses with failed, close lets go, a new open works', async () => {
    const a = await Kitfox.open(':memory:');
    const b = await Kitfox.open(':memory:');
    a.query('create collection t (n int)');
    b.query('create collection t (n int)');
    assert.equal(a._core, b._core); // one module per process
    // As the module throws when its stack runs out (a RangeError from
    // inside a call): simulated, since nothing in the engine is known to.
    // (query() runs a short text as a kept prepared statement: kfRun.)
    const core = a._core;
    const real = core.kfRun;
    core.kfRun = () => {
      throw new RangeError('Maximum call stack size exceeded');
    };
    try {
      assert.throws(() => a.query('put t {n: 1}'), (e) => e instanceof KitfoxError && e.code === 'failed' && /RangeError/.test(e.message));
    } finally {
      core.kfRun = real;
    }
    // Nothing calls into the given-up module again: no hang, a clear error.
    assert.throws(() => a.query('get t count'), { code: 'failed' });
    assert.throws(() => b.batch([['put t {n: 2}']]), { code: 'failed' });
    assert.throws(() => b.checkpoint(), { code: 'failed' });
    a.close();
    b.close();
    assert.ok(a.closed && b.closed);
    const c = await Kitfox.open(':memory:');
    assert.notEqual(c._core, core);
    c.query('create collection t (n int)');
    c.query('put t {n: 3}');
    assert.equal(count(c), 1);
    c.close();
  });
});
