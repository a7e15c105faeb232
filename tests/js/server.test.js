// `kitfox serve` (native/http_server.cpp, native/http_api.cpp) and its
// client kitfox/http (js/http.js): every endpoint and error status, the
// token, --max-body, clients that hang up or idle, many connections, writers
// at once, a kill -9 during durable writes and a graceful stop.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { connect, KitfoxClient, KitfoxError } from '../../js/http.js';
import { cli, startServer, tempDir, within } from './helpers.js';

const work = tempDir('kitfox-serve-');
let n = 0;
const fresh = () => path.join(work, `db${++n}.kfdb`);

// A promise that resolves once tick(count) is called with count >= n:
// the test waits for the count itself, not for a time.
function countReached(n) {
  let resolve;
  const reached = new Promise((r) => (resolve = r));
  return { reached, tick: (count) => count >= n && resolve() };
}

async function post(url, pathname, body, headers = {}) {
  const res = await fetch(url + pathname, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

// Sends raw bytes on a new connection; resolves to everything the server
// sent back before it closed the connection (or, with `untilText`, once
// what it sent holds that text).
function raw(port, bytes, { end = false, buffer = false, untilText = null } = {}) {
  return within(
    new Promise((resolve, reject) => {
      const sock = net.connect(port, '127.0.0.1', () => (end ? sock.end(bytes) : sock.write(bytes)));
      const got = [];
      sock.on('data', (d) => {
        got.push(d);
        if (untilText && Buffer.concat(got).toString('utf8').includes(untilText)) sock.destroy();
      });
      sock.on('close', () => resolve(buffer ? Buffer.concat(got) : Buffer.concat(got).toString('utf8')));
      sock.on('error', reject);
    }),
    'the server did not close the connection',
  );
}

test('every endpoint answers, and kitfox/http has the embedded methods', async () => {
  const s = await startServer(fresh());
  try {
    const db = await connect(s.url);
    assert.deepEqual(await db.health(), { ok: true });
    // HEAD is GET without the body: a GET pipelined after it on the same
    // connection is read as the next response, so no body came between.
    const both = await raw(s.port, 'HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.match(both, /^HTTP\/1\.1 200 OK\r\n[^]*?Content-Length: 11\r\n\r\nHTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n\{"ok":true\}$/);
    assert.equal((await fetch(`${s.url}/stats`, { method: 'HEAD' })).status, 200);
    // The absolute form of a target, as a proxy sends it.
    for (const target of [`${s.url}/health`, `HTTP://127.0.0.1:${s.port}/health?x=1`])
      assert.match(await raw(s.port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 200 OK\r\n[^]*\{"ok":true\}$/, target);
    const del = await fetch(`${s.url}/health`, { method: 'DELETE' });
    assert.equal(del.status, 405);
    assert.equal(del.headers.get('allow'), 'GET, HEAD');
    await db.query('create collection notes (title text @unique, n int, embed vector<3> @hnsw)');
    assert.deepEqual(await db.put('notes', [
      { title: 'a', n: 1, embed: [1, 0, 0] },
      { title: 'b', n: 2, embed: [0, 1, 0] },
    ]), [1, 2]);
    assert.deepEqual(await db.query('get notes select title where n = $1', [2]), [{ id: 2, title: 'b' }]);
    const near = await db.near('notes', 'embed', new Float32Array([0, 0.9, 0.1]), { limit: 1, select: 'title' });
    assert.equal(near.length, 1);
    assert.equal(near[0].title, 'b');
    // A batch: each statement sees the ones before it.
    const [put, count] = await db.batch([['put notes {title: $1, n: 3, embed: [0, 0, 1]}', ['c']], ['get notes count']]);
    assert.deepEqual(put, [{ id: 3 }]);
    assert.deepEqual(count, [{ count: 3 }]);
    // NDJSON into /docs; blank lines are skipped.
    const nd = await fetch(`${s.url}/docs/notes`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: '{"title":"d","n":4,"embed":[1,1,0]}\n\n{"title":"e","n":5,"embed":[0,1,1]}\n',
    });
    assert.equal(nd.status, 200);
    assert.deepEqual(await nd.json(), { ids: [4, 5] });
    // A prepared statement runs with new parameters; its text is checked first.
    const st = await db.prepare('get notes select title where id = $1');
    assert.equal(st.isWrite, false);
    assert.deepEqual(await st.query([4]), [{ id: 4, title: 'd' }]);
    await assert.rejects(db.prepare('get notes where nope = 1'), (e) => e instanceof KitfoxError && e.code === 'not_found' && e.position === 16);
    // Rows as the native CLI prints them.
    assert.deepEqual(await db.queryJSON('get notes select n where id = 1'), ['{"id":1,"n":1}']);
    const stats = await db.stats();
    assert.equal(stats.collections.find((c) => c.name === 'notes').documents, 5);
    assert.ok(stats.fileBytes > 0);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('kitfox/http sends values as the embedded API takes them, or refuses them as it does', async () => {
  const s = await startServer(fresh());
  try {
    // fetch is called as a plain function: a browser's or a Worker's
    // refuses to run as a method of another object.
    const fetchAlone = function (input, init) {
      'use strict';
      if (this !== undefined) throw new TypeError('Illegal invocation');
      return fetch(input, init);
    };
    const db = await connect(s.url, { fetch: fetchAlone });
    await db.query('create collection v (i int, f float, b bytes, t text, ts timestamp, j json, e vector<3>)');
    // Integers beyond 2^53 keep every digit: a number (exact in a double)
    // and a BigInt; JSON.stringify would write 2 ** 60 as another integer.
    await db.query('put v {i: $1}', [2 ** 60]);
    await db.query('put v {i: $1}', [-(2 ** 63)]);
    await db.query('put v {i: $1}', [2n ** 62n + 1n]);
    await db.batch([['put v {i: $1}', [2 ** 60 + 2 ** 8]]]);
    assert.deepEqual(await db.queryJSON('get v select i'), [
      '{"id":1,"i":1152921504606846976}',
      '{"id":2,"i":-9223372036854775808}',
      '{"id":3,"i":4611686018427387905}',
      '{"id":4,"i":1152921504606847232}',
    ]);
    // ... and come back with every digit, as BigInts, as the embedded API
    // gives them (JSON.parse would round them).
    assert.deepEqual(await db.query('get v select i where id <= 4'), [
      { id: 1, i: 2n ** 60n },
      { id: 2, i: -(2n ** 63n) },
      { id: 3, i: 2n ** 62n + 1n },
      { id: 4, i: 2n ** 60n + 2n ** 8n },
    ]);
    // Bytes as base64, a Date as ISO-8601 text, vectors as numbers.
    const ids = await db.put('v', [
      { b: new Uint8Array([104, 105, 0, 255]), ts: new Date(Date.UTC(2024, 0, 2)), e: new Float32Array([0.5, 0, 1]) },
      { b: new Uint8Array([1, 2]).buffer, j: { deep: [new Uint8Array([7])] } },
    ]);
    assert.deepEqual(await db.queryJSON('get v select b, ts, e, j where id in $1', [ids]), [
      '{"id":5,"b":"aGkA/w==","ts":"2024-01-02T00:00:00.000Z","e":[0.5,0,1],"j":null}',
      '{"id":6,"b":"AQI=","ts":null,"e":null,"j":{"deep":["Bw=="]}}',
    ]);
    // Refused on the client, as the embedded API refuses them, naming where.
    const refused = [
      [() => db.query('put v {f: $1}', [NaN]), 'type', /parameter \$1: NaN cannot travel as JSON/],
      [() => db.query('get v where f < $1', [-Infinity]), 'type', /parameter \$1: -Infinity cannot travel as JSON/],
      [() => db.query('put v {ts: $1}', [new Date('nope')]), 'type', /parameter \$1: an invalid Date/],
      [() => db.query('put v {j: $1}', [{ a: [1, new Map()] }]), 'type', /parameter \$1\.a\[1\]: a Map cannot be stored/],
      [() => db.query('put v {e: $1}', [new Int8Array(3)]), 'type', /a Int8Array cannot be stored/],
      [() => db.query('put v {i: $1}', [2n ** 63n]), 'type', /out of the 64-bit integer range/],
      [() => db.query('put v {t: $1}', ['\ud800']), 'type', /unpaired UTF-16 surrogate/],
      [() => db.near('v', 'e', new Float32Array([1, NaN, 0])), 'type', /parameter \$1\[1\]: NaN cannot travel as JSON/],
      [() => db.batch([['get v'], ['put v {f: $1}', [Infinity]]]), 'type', /batch entry 2: parameter \$1: Infinity cannot travel as JSON/],
      [() => db.batch([['get v'], ['put v {j: $1}', [{ s: new Set() }]]]), 'type', /batch entry 2: parameter \$1\.s: a Set cannot be stored/],
      [() => db.put('v', [{ f: 1 }, { f: NaN }]), 'type', /document 2\.f: NaN cannot travel as JSON/],
      [() => db.put('v', [{ f: 1 }, { j: [() => 1] }]), 'type', /document 2\.j\[0\]: a function cannot be stored/],
    ];
    for (const [call, code, message] of refused)
      await assert.rejects(call(), (e) => e instanceof KitfoxError && e.code === code && message.test(e.message), String(message));
    assert.deepEqual(await db.query('get v count'), [{ count: 6 }]);
    // In a json field and through batch() too; a float stays a number, and
    // digits in a text stay text.
    const [bigId] = await db.put('v', [{ j: { n: [2n ** 53n + 1n, -(2n ** 53n) - 1n, 2 ** 53 - 1] }, f: 2 ** 70, t: '12345678901234567' }]);
    assert.deepEqual(await db.batch([[`get v select j, f, t where id = ${bigId}`]]), [
      [{ id: bigId, j: { n: [2n ** 53n + 1n, -(2n ** 53n) - 1n, 2 ** 53 - 1] }, f: 2 ** 70, t: '12345678901234567' }],
    ]);
    // A long text with quotes and backslashes beside a long integer: the
    // answer's strings are skipped by a scan, not a regular expression
    // (whose backtracking overflowed the stack at 8.5 MB).
    const long = 'a"\\'.repeat(3_000_000) + ' 12345678901234567';
    const [longId] = await db.put('v', [{ t: long, i: 2n ** 60n + 1n }]);
    const [back] = await db.query('get v select t, i where id = $1', [longId]);
    assert.equal(back.t === long, true);
    assert.equal(back.i, 2n ** 60n + 1n);
    // A Uint8Array travels as base64, which a bytes field compares with.
    assert.deepEqual(await db.query('get v select id where b = $1', [new Uint8Array([104, 105, 0, 255])]), [{ id: 5 }]);
    // A token must travel in a header.
    assert.throws(() => new KitfoxClient(s.url, { token: 'tök€n' }), (e) => e.code === 'invalid' && /token/.test(e.message));
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test("kitfox/http: an answer that is not a kitfox server's, or cut short, is an io error", async () => {
  const http = await import('node:http');
  const answers = {
    '/health': (res) => res.end('{"ok":true}'),
    '/query': (res) => res.end('<html>a proxy page</html>'),
    '/batch': (res) => res.end('{"results":[{"rows":[]},{}]}'),
    '/prepare': (res) => res.end('{"ok":true}'),
    '/stats': (res) => res.end('{"file_bytes":1}'),
    '/docs/t': (res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"ids":[1,');
      res.socket.destroy(); // the connection fails while the answer comes
    },
  };
  const server = http.createServer((req, res) => answers[req.url](res));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const db = await connect(`http://127.0.0.1:${server.address().port}`);
    await assert.rejects(db.query('get t'), (e) => e instanceof KitfoxError && e.code === 'io' && /not a kitfox server's.*<html>/.test(e.message));
    await assert.rejects(db.batch(['get t', 'get t']), (e) => e instanceof KitfoxError && e.code === 'io' && /no "results"/.test(e.message));
    await assert.rejects(db.prepare('get t'), (e) => e instanceof KitfoxError && e.code === 'io' && /not a kitfox server's/.test(e.message));
    await assert.rejects(db.stats(), (e) => e instanceof KitfoxError && e.code === 'io' && /not a kitfox server's/.test(e.message));
    await assert.rejects(db.put('t', [{}]), (e) => e instanceof KitfoxError && e.code === 'io' && /POST .*\/docs\/t failed/.test(e.message));
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test('errors are JSON with the right status, and change nothing', async () => {
  const s = await startServer(fresh());
  try {
    const { url } = s;
    await post(url, '/query', { query: 'create collection t (k text @unique, n int)' });
    await post(url, '/query', { query: 'put t {k: "a", n: 1}' });
    const error = (r, status, code) => {
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.equal(r.body.error.code, code, JSON.stringify(r.body));
      assert.equal(typeof r.body.error.message, 'string');
      assert.ok('position' in r.body.error);
    };
    // Bad JSON names its byte.
    let r = await post(url, '/query', '{"query": "get t", ');
    error(r, 400, 'json');
    assert.match(r.body.error.message, /at byte 19/);
    // A statement error names its byte in the statement.
    r = await post(url, '/query', { query: 'get t where nope = 1' });
    error(r, 400, 'not_found');
    assert.equal(r.body.error.position, 12);
    r = await post(url, '/query', { query: 'get t wher' });
    error(r, 400, 'syntax');
    error(await post(url, '/query', { query: 'get t', parms: [] }), 400, 'invalid');
    error(await post(url, '/query', { params: [] }), 400, 'invalid');
    error(await post(url, '/query', { query: 'get t', params: 3 }), 400, 'invalid');
    error(await post(url, '/query', [1]), 400, 'invalid');
    // A conflict with what is stored.
    error(await post(url, '/query', { query: 'put t {k: "a", n: 2}' }), 409, 'constraint');
    // Transactions are the embedded API's; the server takes batches.
    r = await post(url, '/query', { query: 'begin' });
    error(r, 400, 'invalid');
    assert.match(r.body.error.message, /batch/);
    // A batch is atomic: the second statement fails, the first did not land.
    r = await post(url, '/batch', [{ query: 'put t {k: "b", n: 2}' }, { query: 'put t {k: "a", n: 3}' }]);
    error(r, 409, 'constraint');
    assert.match(r.body.error.message, /statement 2/);
    error(await post(url, '/batch', { query: 'get t' }), 400, 'invalid');
    // /docs: the collection of the path, documents that do not fit.
    error(await post(url, '/docs/nope', [{ k: 'x' }]), 404, 'not_found');
    error(await post(url, '/docs/t', [{ k: 'x', n: 'not a number' }]), 400, 'type');
    error(await post(url, '/docs/t', [{ k: 'x' }, 7]), 400, 'invalid');
    error(await post(url, '/docs/t', { k: 'x' }), 400, 'invalid');
    r = await fetch(`${url}/docs/t`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: '{"k":"y","n":1}\n{"k":\n' });
    const nd = await r.json();
    assert.equal(r.status, 400);
    assert.match(nd.error.message, /^line 2: /);
    error(await post(url, '/docs/t', [{ k: 'a', n: 9 }]), 409, 'constraint');
    // A unique value given twice in the body, or held already: the documents
    // named by their numbers in the body, a stored one by its id.
    r = await post(url, '/docs/t', [{ k: 'p' }, { k: 'q' }, { k: 'p' }]);
    error(r, 409, 'constraint');
    assert.match(r.body.error.message, /^document 3: unique 'k': "p" is given to document 1 too; nothing was written/);
    r = await post(url, '/docs/t', [{ k: 'p' }, { k: 'a' }]);
    error(r, 409, 'constraint');
    assert.match(r.body.error.message, /^document 2: unique 'k': "a" is already held by the document with id 1;/);
    // NDJSON: the engine's document numbers with their lines (blank lines
    // counted), and a line that is no object named by its line.
    const ndjson = (body) => fetch(`${url}/docs/t`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    r = await ndjson('{"k":"p"}\n\n\n{"k":"q"}\n{"k":"p"}\n');
    assert.equal(r.status, 409);
    assert.match((await r.json()).error.message, /^document 3 \(line 5\): unique 'k': "p" is given to document 1 \(line 1\) too; nothing was written/);
    // A value the message quotes is left as the document holds it.
    r = await ndjson('{"k":"document 2"}\n\n{"k":"document 2"}\n');
    assert.equal(r.status, 409);
    assert.match((await r.json()).error.message, /^document 2 \(line 3\): unique 'k': "document 2" is given to document 1 \(line 1\) too/);
    r = await ndjson('{"k":"p"}\n\n[1]\n');
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.message, 'line 3 is list, not an object');
    // An integer out of range, or nesting too deep, named by its byte.
    const far = `[{"k":"p"},{"k":"q","n":9223372036854775808}]`;
    r = await post(url, '/docs/t', far);
    error(r, 400, 'limit');
    assert.match(r.body.error.message, new RegExp(`out of range \\(int64\\) at byte ${far.indexOf('9223')}$`));
    const deepBody = `{"query":"put t {k: $1}","params":["x",${'['.repeat(70)}${']'.repeat(70)}]}`;
    r = await post(url, '/batch', `[${deepBody}]`);
    error(r, 400, 'limit');
    assert.match(r.body.error.message, new RegExp(`nested deeper than 64 levels at byte ${1 + deepBody.indexOf('[[') + 64}$`));
    // Not JSON: refused before anything runs (a page of another origin can
    // send a form or text without asking first, never JSON).
    r = await fetch(`${url}/query`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"query":"del t"}' });
    assert.equal(r.status, 415);
    assert.equal((await r.json()).error.code, 'invalid');
    // Paths and methods.
    r = await fetch(`${url}/nowhere`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, 'not_found');
    r = await fetch(`${url}/query`);
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'POST');
    r = await fetch(`${url}/health`, { method: 'POST' });
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'GET, HEAD');
    // A malformed request line.
    assert.match(await raw(s.port, 'BAD REQUEST LINE\r\n\r\n'), /^HTTP\/1\.1 400 /);
    // A transfer coding other than chunked: 400, and what follows the
    // header is not read as a request of its own.
    const inner = '{"query":"put t {k: \\"smuggled\\"}"}';
    const hidden = `POST /query HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`;
    for (const te of ['Transfer-Encoding: gzip', 'Transfer-Encoding: chunked, chunked', 'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity']) {
      const got = await raw(s.port, `POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${te}\r\n\r\n${hidden}`, { end: true });
      assert.match(got, /^HTTP\/1\.1 400 /, te);
      assert.match(got, /Transfer-Encoding/, te);
      assert.equal(got.match(/HTTP\/1\.1 /g).length, 1, te);
    }
    // Bytes that are no UTF-8 in the target: the answer is JSON all the same.
    const bad = Buffer.concat([Buffer.from('POST /docs/'), Buffer.from([0xc3]),
      Buffer.from(' HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]')]);
    const answer = await raw(s.port, bad, { end: true, buffer: true });
    const said = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(answer.subarray(answer.indexOf('\r\n\r\n') + 4)));
    assert.equal(said.error.code, 'not_found');
    assert.match(said.error.message, /\ufffd/);
    // Nothing changed: one document, the first.
    assert.deepEqual((await post(url, '/query', { query: 'get t select k' })).body.rows, [{ id: 1, k: 'a' }]);
    // The client throws what the server said.
    const db = new KitfoxClient(url);
    await assert.rejects(db.query('get t where nope = 1'), (e) => e instanceof KitfoxError && e.code === 'not_found' && e.message === "not_found error at 12: unknown field 'nope' in collection 't'");
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('a value nests as deep through every endpoint as from the CLI: a document, a parameter, each from itself', async () => {
  const s = await startServer(fresh());
  try {
    const db = new KitfoxClient(s.url);
    await db.query('create collection d (j json)');
    const nest = (n) => '['.repeat(n) + ']'.repeat(n);
    const send = (path, body, type = 'application/json') => fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
    // A document whose field nests 64 levels (a statement's literal may):
    // through NDJSON, an array body and a parameter; 65 is refused by each.
    for (const [depth, ok] of [[64, 200], [65, 400]]) {
      const doc = `{"j":${nest(depth)}}`;
      const answers = [
        await send('/docs/d', doc, 'application/x-ndjson'),
        await send('/docs/d', `[${doc}]`),
        await send('/query', `{"query":"put d $1","params":[${doc}]}`),
        await send('/batch', `[{"query":"put d $1","params":[${doc}]}]`),
      ];
      assert.deepEqual(answers.map((r) => r.status), Array(4).fill(ok), `depth ${depth}`);
    }
    // A parameter nests 64 levels below itself, as `--param` and the
    // embedded API's do, wherever the body puts it; a list of documents
    // counts from the list.
    for (const [body, ok] of [
      [`{"query":"put d {j: $1}","params":[${nest(65)}]}`, 200],
      [`{"query":"put d {j: $1}","params":[${nest(66)}]}`, 400],
      [`{"query":"put d $1","params":[[{"j":${nest(63)}}]]}`, 200],
      [`{"query":"put d $1","params":[[{"j":${nest(64)}}]]}`, 400],
    ]) {
      assert.equal((await send('/query', body)).status, ok, body.slice(0, 40));
      assert.equal((await send('/batch', `[${body}]`)).status, ok, body.slice(0, 40));
    }
    assert.deepEqual(await db.query('get d count'), [{ count: 8 }]);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('a token is asked for, and compared', async () => {
  const s = await startServer(fresh(), ['--token', 's3cret']);
  try {
    let r = await post(s.url, '/query', { query: 'collections' });
    assert.equal(r.status, 401);
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'Bearer s3cre' });
    assert.equal(r.status, 401);
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'Bearer s3cret!' });
    assert.equal(r.status, 401);
    assert.equal((await fetch(`${s.url}/stats`)).status, 401);
    assert.equal((await fetch(`${s.url}/docs/t`, { method: 'POST' })).status, 401);
    // A path that is no endpoint too: without the token nothing is told.
    assert.equal((await fetch(`${s.url}/nowhere`)).status, 401);
    assert.equal((await fetch(`${s.url}/nowhere`, { headers: { authorization: 'Bearer s3cret' } })).status, 404);
    // The health check needs none.
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'Bearer s3cret' });
    assert.equal(r.status, 200);
    // The scheme in any case, then one space or more (RFC 9110, 11.4);
    // the scheme alone gives no token.
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'bearer   s3cret' });
    assert.equal(r.status, 200);
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'Bearer' });
    assert.equal(r.status, 401);
    assert.match(r.body.error.message, /needs a token/);
    r = await post(s.url, '/query', { query: 'collections' }, { authorization: 'Bearers3cret' });
    assert.match(r.body.error.message, /the token is wrong/);
    // A client that waits for 100 Continue before it sends its body gets
    // the refusal instead, and sends nothing; over HTTP/1.0, which has no
    // 100 Continue, the expectation is ignored.
    const json = '{"query": "collections"}';
    const head = (version, auth) =>
      `POST /query HTTP/${version}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\nExpect: 100-continue\r\n${auth}\r\n`;
    let got = await raw(s.port, head('1.1', 'Authorization: Bearer nope\r\n'));
    assert.match(got, /^HTTP\/1\.1 401 /);
    assert.doesNotMatch(got, /100 Continue/);
    // A HEAD refused so gets the refusal's headers and no body.
    got = await raw(s.port, 'HEAD /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
    assert.match(got, /^HTTP\/1\.1 401 /);
    assert.ok(got.endsWith('\r\n\r\n'), got);
    got = await raw(s.port, head('1.1', 'Authorization: Bearer s3cret\r\n'), { untilText: '100 Continue' });
    assert.match(got, /^HTTP\/1\.1 100 Continue\r\n/);
    got = await raw(s.port, `${head('1.0', 'Authorization: Bearer s3cret\r\n')}${json}`);
    assert.match(got, /^HTTP\/1\.0 200 /);
    assert.doesNotMatch(got, /100 Continue/);
    const db = await connect(s.url, { token: 's3cret' });
    assert.deepEqual(await db.query('collections'), []);
    await assert.rejects(new KitfoxClient(s.url, { token: 'wrong' }).query('collections'), (e) => e.code === 'invalid' && /token/.test(e.message));
  } finally {
    await s.stop();
  }
});

test('--cors: pages of the origins named may call the server; others not', async () => {
  // A database in memory (`:memory:`): nothing on disk.
  const s = await startServer(':memory:', ['--cors', 'http://app.test,http://other.test:8080']);
  try {
    const pre = await fetch(`${s.url}/query`, {
      method: 'OPTIONS',
      headers: { origin: 'http://app.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('content-length'), null); // none in a 204 (RFC 9110, 8.6)
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://app.test');
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    assert.match(pre.headers.get('access-control-allow-headers'), /Content-Type/i);
    const r = await fetch(`${s.url}/query`, {
      method: 'POST',
      headers: { origin: 'http://other.test:8080', 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'collections' }),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://other.test:8080');
    assert.equal(r.headers.get('vary'), 'Origin');
    // An origin not named gets no CORS header, and no preflight answer.
    const evil = await fetch(`${s.url}/query`, { method: 'OPTIONS', headers: { origin: 'http://evil.test', 'access-control-request-method': 'POST' } });
    assert.notEqual(evil.status, 204);
    assert.equal(evil.headers.get('access-control-allow-origin'), null);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('a body over --max-body gets 413; the server goes on', async () => {
  const s = await startServer(fresh(), ['--max-body', '1000']);
  try {
    await post(s.url, '/query', { query: 'create collection t (s text)' });
    const big = { query: 'put t {s: $1}', params: ['x'.repeat(5000)] };
    const r = await post(s.url, '/query', big);
    assert.equal(r.status, 413);
    assert.equal(r.body.error.code, 'limit');
    assert.match(r.body.error.message, /--max-body/);
    const ok = await post(s.url, '/query', { query: 'put t {s: $1}', params: ['small'] });
    assert.equal(ok.status, 200);
    assert.deepEqual((await post(s.url, '/query', { query: 'get t count' })).body.rows, [{ count: 1 }]);
  } finally {
    await s.stop();
  }
});

test("paths are %-decoded; a chunk's size line and the trailers are bounded", async () => {
  const s = await startServer(fresh(), ['--max-body', '1000']);
  try {
    await post(s.url, '/query', { query: 'create collection t (s text)' });
    // /docs/%74 is /docs/t, /%71uery is /query (RFC 3986, 6.2.2.2).
    assert.deepEqual((await post(s.url, '/docs/%74', [{ s: 'a' }])).body, { ids: [1] });
    assert.deepEqual((await post(s.url, '/%71uery', { query: 'get t count' })).body.rows, [{ count: 1 }]);
    const bad = await post(s.url, '/docs/%7', [{ s: 'b' }]);
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /a malformed path/);
    // Chunk extensions and trailers are bounded by no body or header limit
    // of the parser's own: the connection's buffer bounds them.
    const json = '{"query": "get t count"}';
    const chunked = (ext, trailers) =>
      `POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `${json.length.toString(16)}${ext}\r\n${json}\r\n0\r\n${trailers}\r\n`;
    assert.match(await raw(s.port, chunked(';a=b', 'X-T: 1\r\n'), { untilText: '"count":1' }), /^HTTP\/1\.1 200 /);
    const long = 'x'.repeat(200 << 10);
    for (const req of [chunked(`;a="${long}"`, ''), chunked('', `X-T: ${long}\r\n`), chunked('', `X-T: 1\r\n`.repeat(40000))]) {
      const got = await raw(s.port, req);
      assert.match(got, /^HTTP\/1\.1 431 /);
      assert.match(got, /a chunk's size line or the request's trailers do not fit the connection's 131072-byte buffer/);
    }
    assert.deepEqual((await post(s.url, '/query', { query: 'get t count' })).body.rows, [{ count: 1 }]);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('a client that hangs up mid-request changes nothing', async () => {
  const s = await startServer(fresh());
  try {
    await post(s.url, '/query', { query: 'create collection t (s text)' });
    const body = JSON.stringify({ query: 'put t {s: $1}', params: ['never'] });
    // The whole header and half the body, then gone.
    await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1', () => {
        sock.end(`POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 20)}`);
      });
      sock.on('close', resolve);
      sock.on('error', resolve);
      sock.resume();
    });
    assert.deepEqual((await post(s.url, '/query', { query: 'get t count' })).body.rows, [{ count: 0 }]);
  } finally {
    await s.stop();
  }
});

test('idle and slow clients are timed out (--timeout)', async () => {
  const s = await startServer(fresh(), ['--timeout', '1']);
  try {
    // One that never sends, and one that stops in the middle of a request:
    // the server closes both (the test waits for that, however long).
    assert.equal(await raw(s.port, ''), '');
    assert.equal(await raw(s.port, 'POST /query HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"qu'), '');
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  } finally {
    await s.stop();
  }
});

test('1,000 idle connections held open: the server still answers others', async () => {
  const s = await startServer(fresh(), ['--loops', '2']);
  const idle = [];
  try {
    await Promise.all(
      Array.from({ length: 1000 }, () =>
        new Promise((resolve, reject) => {
          const sock = net.connect(s.port, '127.0.0.1', () => {
            // Half of them in the middle of a request.
            if (idle.length % 2) sock.write('POST /query HTTP/1.1\r\nHost: x\r\n');
            resolve();
          });
          sock.on('error', reject);
          sock.resume();
          idle.push(sock);
        }),
      ),
    );
    const db = await connect(s.url);
    await db.query('create collection t (n int)');
    await db.query('put t {n: 1}');
    assert.deepEqual(await db.query('get t count'), [{ count: 1 }]);
  } finally {
    for (const sock of idle) sock.destroy();
    await s.stop();
  }
});

test('requests that may run long are handed to the worker threads, the rest run on the loop', async () => {
  // One loop and one worker: what ran where is counted in /stats.
  const s = await startServer(fresh(), ['--loops', '1', '--threads', '1']);
  let db;
  const where = async () => (await db.stats()).server;
  try {
    db = await connect(s.url);
    await db.query('create collection t (n int @sorted, s text)');
    const docs = Array.from({ length: 3000 }, (_, i) => ({ n: i % 10, s: `text ${i}` }));
    const body = JSON.stringify(docs);
    assert.ok(body.length > 64 * 1024);
    let was = await where();
    // A body over 64 KiB: handed over, and its ids come back.
    const ids = await db.put('t', docs);
    assert.equal(ids.length, 3000);
    let now = await where();
    assert.equal(now.ranHandedOver, was.ranHandedOver + 1);
    assert.equal(now.ranOnLoop, was.ranOnLoop);
    // A read by id and a small put run on the loop.
    was = now;
    assert.deepEqual(await db.query('get t where id = $1 select s', [7]), [{ id: 7, s: 'text 6' }]);
    await db.query('put t {n: 1, s: "x"}');
    now = await where();
    assert.equal(now.ranOnLoop, was.ranOnLoop + 2);
    assert.equal(now.ranHandedOver, was.ranHandedOver);
    // An aggregate (a scan): handed over each time, with the right answer.
    for (let i = 0; i < 2; i++) {
      was = now;
      assert.deepEqual(await db.query('get t select count(*), sum(n)'), [{ 'count(*)': 3001, 'sum(n)': 13501 }]);
      now = await where();
      assert.equal(now.ranHandedOver, was.ranHandedOver + 1);
    }
    // A read through an index: handed over the first time (not planned
    // yet), then known short and run on the loop.
    was = now;
    const rows = await db.query('get t where n = $1 limit 2 select n', [3]);
    assert.deepEqual(rows, [{ id: 4, n: 3 }, { id: 14, n: 3 }]);
    now = await where();
    assert.equal(now.ranHandedOver, was.ranHandedOver + 1);
    was = now;
    assert.deepEqual(await db.query('get t where n = $1 limit 2 select n', [3]), rows);
    now = await where();
    assert.equal(now.ranOnLoop, was.ranOnLoop + 1);
    assert.equal(now.ranHandedOver, was.ranHandedOver);
    // A batch holding a scan is handed over whole, also once the scan has
    // run before (known long, not merely not run yet).
    const scan = 'get t where s = $1';
    assert.deepEqual(await db.query(scan, ['text 5']), [{ id: 6, n: 5, s: 'text 5' }]);
    was = await where();
    const [found, put] = await db.batch([[scan, ['text 5']], ['put t {n: 2}']]);
    assert.deepEqual(found, [{ id: 6, n: 5, s: 'text 5' }]);
    assert.equal(put.length, 1);
    now = await where();
    assert.equal(now.ranHandedOver, was.ranHandedOver + 1);
    assert.equal(now.ranOnLoop, was.ranOnLoop);
  } finally {
    await s.stop();
  }
});

test('writers on many connections at once land every write', async () => {
  const file = fresh();
  const s = await startServer(file, ['--sync', 'always']);
  try {
    const db = await connect(s.url);
    await db.query('create collection t (w int, i int)');
    const writers = 8;
    const each = 100;
    const ids = await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const mine = [];
        const c = new KitfoxClient(s.url);
        for (let i = 0; i < each; i++) mine.push((await c.query('put t {w: $1, i: $2}', [w, i]))[0].id);
        return mine;
      }),
    );
    const all = ids.flat();
    assert.equal(new Set(all).size, writers * each);
    assert.deepEqual(await db.query('get t count'), [{ count: writers * each }]);
  } finally {
    assert.equal(await s.stop(), 0);
  }
  // And the file has them all.
  const out = execFileSync(cli, [file, '-c', 'get t count'], { encoding: 'utf8' });
  assert.equal(out.trim(), '{"count":800}');
});

test('kill -9 during durable writes: after a restart every acknowledged write is there', async () => {
  const file = fresh();
  let s = await startServer(file, ['--sync', 'always']);
  const acked = [];
  const some = countReached(200);
  try {
    await new KitfoxClient(s.url).query('create collection t (key text @unique)');
    let stop = false;
    const writers = Array.from({ length: 4 }, async (_, w) => {
      const c = new KitfoxClient(s.url);
      for (let i = 0; !stop; i++) {
        const key = `w${w}-${i}`;
        try {
          await c.query('put t {key: $1}', [key]);
          acked.push(key);
          some.tick(acked.length);
        } catch (e) {
          if (e.code !== 'io') throw e; // the server is gone
          return;
        }
      }
    });
    // Kill once some writes were acknowledged (a count, not a time).
    await within(some.reached, 'no writes were acknowledged');
    s.child.kill('SIGKILL');
    await s.exited;
    stop = true;
    await Promise.all(writers);
  } finally {
    await s.stop();
  }
  s = await startServer(file);
  try {
    const db = new KitfoxClient(s.url);
    const rows = await db.query('get t select key');
    const have = new Set(rows.map((r) => r.key));
    const lost = acked.filter((k) => !have.has(k));
    assert.deepEqual(lost, [], `${lost.length} acknowledged writes lost`);
    assert.ok(acked.length >= 200);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('SIGTERM: requests in flight finish, what was acknowledged is in the file and nothing else, exit 0', async () => {
  const file = fresh();
  const s = await startServer(file, ['--sync', 'off']);
  const acked = [];
  const some = countReached(100);
  try {
    const db = new KitfoxClient(s.url);
    await db.query('create collection t (key text @unique)');
    // Writers in a loop on kept-alive connections; stop the server while
    // they go on.
    let failures = 0;
    const writers = Array.from({ length: 4 }, async (_, w) => {
      const c = new KitfoxClient(s.url);
      for (let i = 0; ; i++) {
        try {
          await c.query('put t {key: $1}', [`w${w}-${i}`]);
          acked.push(`w${w}-${i}`);
          some.tick(acked.length);
        } catch (e) {
          if (e.code !== 'io') throw e;
          failures++;
          return;
        }
      }
    });
    await within(some.reached, 'no writes were acknowledged');
    assert.equal(await s.stop('SIGTERM'), 0, s.stderr());
    await Promise.all(writers);
    assert.equal(failures, 4); // each writer saw the server go, none an error from it
  } finally {
    await s.stop();
  }
  const out = execFileSync(cli, [file, '-c', 'get t select key'], { encoding: 'utf8' });
  const have = new Set(out.trim().split('\n').map((l) => JSON.parse(l).key));
  const lost = acked.filter((k) => !have.has(k));
  assert.deepEqual(lost, []);
  // A request the server stored was answered: one read whole as the
  // server stopped is either run and answered, or not run.
  const ackedSet = new Set(acked);
  const unanswered = [...have].filter((k) => !ackedSet.has(k));
  assert.deepEqual(unanswered, [], 'stored but never answered');
});

// A client that asks for a large answer and does not read it: the answer
// cannot go out whole (the socket's buffers are full).
async function notReading(s, text) {
  const body = JSON.stringify({ query: text });
  const sock = net.connect(s.port, '127.0.0.1');
  await new Promise((resolve, reject) => {
    sock.on('connect', resolve);
    sock.on('error', reject);
  });
  sock.on('error', () => {});
  sock.pause();
  sock.write(`POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  return sock;
}

async function bigCollection(url) {
  const db = new KitfoxClient(url);
  await db.query('create collection big (s text)');
  await db.query('put big $1', [Array.from({ length: 400 }, (_, i) => ({ s: `${i}`.padEnd(100000, 'x') }))]);
  return db;
}

test('stopping, a response is still given the timeout to be taken; a second SIGTERM closes every connection now', async () => {
  // --timeout 1: the stop closes the client that does not read once the
  // timeout has passed, as the server would while serving. Before, it
  // waited for that client for as long as the client liked.
  let s = await startServer(fresh(), ['--timeout', '1']);
  let sock;
  try {
    await bigCollection(s.url);
    sock = await notReading(s, 'get big');
    await within(new Promise((r) => sock.once('readable', r)), 'no answer began');
    assert.equal(await s.stop('SIGTERM'), 0, s.stderr());
  } finally {
    sock?.destroy();
    await s.stop();
  }
  // A long timeout: a second SIGTERM closes the connections at once; the
  // database is still flushed and closed (the writes acknowledged are there).
  const file = fresh();
  s = await startServer(file, ['--timeout', '600', '--sync', 'off']);
  try {
    await bigCollection(s.url);
    sock = await notReading(s, 'get big');
    await within(new Promise((r) => sock.once('readable', r)), 'no answer began');
    const told = new Promise((resolve) => s.child.stderr.on('data', () => /again to stop at once/.test(s.stderr()) && resolve()));
    s.child.kill('SIGTERM');
    await within(told, 'the server did not say it was stopping');
    assert.equal(await s.stop('SIGTERM'), 0, s.stderr());
    assert.match(s.stderr(), /SIGTERM again: closing every connection now/);
  } finally {
    sock?.destroy();
    await s.stop();
  }
  assert.equal(execFileSync(cli, [file, '-c', 'get big count'], { encoding: 'utf8' }).trim(), '{"count":400}');
});

test('a second server on the same file is refused: locked', async () => {
  const file = fresh();
  const s = await startServer(file);
  try {
    let r;
    try {
      execFileSync(cli, ['serve', file, '--port', '0'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      r = { code: 0 };
    } catch (e) {
      r = { code: e.status, stderr: e.stderr };
    }
    assert.equal(r.code, 1);
    assert.match(r.stderr, /locked/);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('bad command lines are refused with usage', () => {
  const run = (args) => {
    try {
      execFileSync(cli, ['serve', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      return { code: 0 };
    } catch (e) {
      return { code: e.status, stderr: e.stderr };
    }
  };
  let r = run([fresh(), '--port', '70000']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--port needs a port number/);
  r = run([fresh(), '--threads', '0']);
  assert.equal(r.code, 2);
  r = run([fresh(), '--loops', '0']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--loops needs a number from 1 to 1024/);
  r = run([fresh(), '--bogus', '1']);
  assert.equal(r.code, 2);
  r = run([]);
  assert.equal(r.code, 2);
  r = run([fresh(), '--host', 'not-an-address']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /not an IP address/);
});
