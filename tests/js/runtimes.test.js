// The packed package (npm pack, installed in a temporary project) in the
// runtimes it supports besides the source tree's Node: Node from the
// tarball, Deno and Bun (tests/js/fixtures/runtime-check.mjs in each), and
// Cloudflare's workerd: the Durable Object example
// (examples/cloudflare-durable-object) keeping a database in its storage
// across requests and across a restart, and a worker using ':memory:',
// bytes and export(), bundled as wrangler bundles (`workerd serve
// wrangler.json`, with esbuild and the `workerd` export condition).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import { cliLines, root, runCli, startServer, tempDir, within } from './helpers.js';
import { bins, pack, project, startWorkerd } from './package.js';

const run = promisify(execFile);

let tarball;
before(() => {
  ({ tarball } = pack());
});

describe('Node, Deno and Bun run the packed package', () => {
  let dir;
  before(() => {
    dir = project(tarball, {
      'check.mjs': fs.readFileSync(path.join(root, 'tests/js/fixtures/runtime-check.mjs'), 'utf8'),
      // CommonJS: require() of the ES module package, Node >= 20.19 (engines).
      'check.cjs': `const { Kitfox, KitfoxError } = require('kitfox');
Kitfox.open(':memory:').then((db) => {
  db.query('create collection t (a int)');
  db.query('put t {a: $1}', [7]);
  let code = null;
  try { db.query('get t where'); } catch (e) { code = e instanceof KitfoxError && e.code; }
  console.log(JSON.stringify({ rows: db.query('get t'), code }));
});
`,
    });
  });

  test('node, require() from CommonJS', async () => {
    const { stdout } = await within(run(process.execPath, ['check.cjs'], { cwd: dir }), 'node never finished');
    assert.deepEqual(JSON.parse(stdout), { rows: [{ id: 1, a: 7 }], code: 'syntax' });
  });

  const expected = {
    platform: 'node',
    near: ['a', 'c'],
    match: ['a', 'c'],
    vectorType: 'Float32Array',
    reopened: 3,
    nearAfterReopen: 'b',
    syntax: 'syntax',
    type: 'type',
    param: 'type',
    countAfterErrors: 3,
  };

  const runtimes = {
    node: [process.execPath, ['check.mjs']],
    deno: [bins.deno, ['run', '--allow-read', '--allow-write', '--allow-env', '--allow-sys', '--allow-net', '--no-prompt', 'check.mjs']],
    bun: [bins.bun, ['run', 'check.mjs']],
  };
  for (const [name, [cmd, args]] of Object.entries(runtimes)) {
    test(name, async () => {
      const data = tempDir(`kitfox-${name}-`);
      const env = { ...process.env, DENO_DIR: path.join(data, '.deno'), NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' };
      const { stdout } = await within(run(cmd, [...args, data], { cwd: dir, env }), `${name} never finished`);
      assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), expected);
      // The file is the native build's too.
      assert.deepEqual(cliLines([path.join(data, 'notes.kfdb'), '-c', 'get notes count']), ['{"count":3}']);
    });
  }
});

describe('Node, Deno, Bun and the native build exclude each other', { skip: process.platform !== 'linux' }, () => {
  let dir;
  before(() => {
    dir = project(tarball, { 'lock-check.mjs': fs.readFileSync(path.join(root, 'tests/js/fixtures/lock-check.mjs'), 'utf8') });
  });
  const env = () => ({ ...process.env, DENO_DIR: path.join(tempDir(), '.deno'), NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' });
  const command = {
    node: (...a) => [process.execPath, ['lock-check.mjs', ...a]],
    deno: (...a) => [bins.deno, ['run', '--allow-read', '--allow-write', '--allow-env', '--allow-sys', '--allow-net', '--no-prompt', 'lock-check.mjs', ...a]],
    bun: (...a) => [bins.bun, ['run', 'lock-check.mjs', ...a]],
  };
  const opens = async (name, file) => {
    const [cmd, args] = command[name]('try', file);
    const { stdout } = await within(run(cmd, args, { cwd: dir, env: env() }), `${name} never finished`);
    return JSON.parse(stdout.trim().split('\n').pop());
  };
  // Each runtime holds a database; every other one (and the CLI) is locked
  // out while it does, and opens it once it closed.
  for (const holderName of Object.keys(command)) {
    test(`held by ${holderName}`, async () => {
      const file = path.join(tempDir(`kitfox-lock-${holderName}-`), 'held.kfdb');
      const [cmd, args] = command[holderName]('hold', file);
      const holder = spawn(cmd, args, { cwd: dir, env: env(), stdio: ['pipe', 'pipe', 'inherit'] });
      try {
        let out = '';
        let heard = () => {};
        holder.stdout.setEncoding('utf8').on('data', (d) => ((out += d), heard()));
        const said = (word) =>
          within(
            new Promise((resolve, reject) => {
              heard = () => out.split('\n').includes(word) && resolve();
              holder.once('exit', (code) => reject(new Error(`${holderName} exited (${code}) before '${word}': ${out}`)));
              heard();
            }),
            `${holderName} never said '${word}'`,
          );
        await said('ready');
        for (const other of Object.keys(command)) assert.deepEqual(await opens(other, file), { code: 'locked' }, `${other} beside ${holderName}`);
        assert.throws(() => runCli([file, '-c', 'get t count']), (e) => /locked/.test(String(e.stderr)), `the CLI beside ${holderName}`);
        holder.stdin.write('close\n');
        await said('closed');
        holder.stdin.end();
        for (const other of Object.keys(command)) assert.deepEqual(await opens(other, file), { opened: true }, `${other} after ${holderName}`);
      } finally {
        if (holder.exitCode === null && holder.signalCode === null) holder.kill('SIGKILL');
      }
    });
  }
  // A child process started while a database is open does not keep its
  // lock (Deno's node:net socket was inherited: the lock outlived close()
  // and the process; Deno binds through libc when it may use FFI).
  test('a child process started while a database is open does not keep its lock', async () => {
    const withFfi = (...a) => [bins.deno, ['run', '--allow-read', '--allow-write', '--allow-env', '--allow-sys', '--allow-ffi', '--allow-run', '--no-prompt', 'lock-check.mjs', ...a]];
    for (const [name, make] of [['node', command.node], ['bun', command.bun], ['deno --allow-ffi', withFfi]]) {
      const file = path.join(tempDir('kitfox-lock-child-'), 'child.kfdb');
      const [cmd, args] = make('child', file);
      const { stdout } = await within(run(cmd, args, { cwd: dir, env: env() }), `${name} never finished`);
      assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), { opened: true }, name);
    }
  });
  test('held by the native build', async () => {
    const file = path.join(tempDir('kitfox-lock-native-'), 'held.kfdb');
    const server = await startServer(file);
    try {
      for (const other of Object.keys(command)) assert.deepEqual(await opens(other, file), { code: 'locked' }, `${other} beside kitfox serve`);
    } finally {
      assert.equal(await server.stop(), 0);
    }
    for (const other of Object.keys(command)) assert.deepEqual(await opens(other, file), { opened: true }, `${other} after kitfox serve`);
  });
});

describe('Node, Deno and Bun reach kitfox serve through kitfox/http from the packed package', () => {
  let dir;
  before(() => {
    dir = project(tarball, { 'http-check.mjs': fs.readFileSync(path.join(root, 'tests/js/fixtures/http-check.mjs'), 'utf8') });
  });
  const runtimes = {
    node: [process.execPath, ['http-check.mjs']],
    deno: [bins.deno, ['run', '--allow-net', '--allow-env', '--no-prompt', 'http-check.mjs']],
    bun: [bins.bun, ['run', 'http-check.mjs']],
  };
  for (const [name, [cmd, args]] of Object.entries(runtimes)) {
    test(name, async () => {
      const server = await startServer(path.join(tempDir(`kitfox-http-${name}-`), 'notes.kfdb'));
      try {
        const env = { ...process.env, DENO_DIR: path.join(tempDir(), '.deno'), NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' };
        const { stdout } = await within(run(cmd, [...args, server.url], { cwd: dir, env }), `${name} never finished`);
        assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), {
          ids: [1, 2],
          batch: [3, 3],
          near: ['a', 'c'],
          prepared: ['b', 'c'],
          error: ['syntax', 15],
          stats: 3,
        });
      } finally {
        assert.equal(await server.stop(), 0);
      }
    });
  }
});

async function post(url, body) {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, body: await r.json() };
}

describe('workerd', () => {
  test('the Durable Object example keeps its database in storage across requests and restarts', async () => {
    const dir = project(tarball, path.join(root, 'examples/cloudflare-durable-object'), 'kitfox-workerd-');
    let w = await startWorkerd(dir);
    try {
      const db = `${w.url}/db/notes`;
      const q = (text, params = []) => post(`${db}/query`, { q: text, params });
      assert.deepEqual(await q('create collection notes (title text, body text, embed vector<3> @hnsw(cosine))'), { status: 200, body: { rows: [] } });
      const put = await post(`${db}/batch`, {
        statements: [
          ['put notes {title: $1, body: $2, embed: $3}', ['a', 'a database in a durable object', [1, 0, 0]]],
          ['put notes {title: $1, body: $2, embed: $3}', ['b', 'edge functions', [0, 1, 0]]],
        ],
      });
      assert.deepEqual(put, { status: 200, body: { results: [[{ id: 1 }], [{ id: 2 }]] } });
      // Each request is a new one to the object: the database stays open in it.
      assert.deepEqual((await q('get notes select title where body ~ $1', ['durable'])).body.rows, [{ id: 1, title: 'a' }]);
      const near = await post(`${db}/near`, { collection: 'notes', field: 'embed', vector: [0, 1, 0], limit: 1, select: ['title'] });
      assert.deepEqual(near.body.rows.map((r) => r.title), ['b']);
      assert.deepEqual((await q('get notes where id = 1')).body.rows[0].embed, [1, 0, 0]);
      // Bad input: the engine's error, and nothing changes.
      const bad = await q('get notes where');
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'syntax');
      assert.equal(bad.body.error.position, 15);
      assert.equal((await q('put notes {title: $1}', [[1, 2]])).body.error.code, 'type');
      // One connection serves every client: a transaction is refused (a
      // client's begin took in the others' writes, its rollback dropped them).
      for (const text of ['begin', '-- mine\n  COMMIT', 'rollback;']) {
        const t = await q(text);
        assert.equal(t.status, 400, text);
        assert.equal(t.body.error.code, 'invalid', text);
      }
      const inBatch = await post(`${db}/batch`, { statements: [['put notes {title: $1}', ['x']], ['begin']] });
      assert.equal(inBatch.status, 400);
      // A body that is no JSON is the client's mistake; an integer beyond
      // 2^53 is kept exact (request.json() rounded it).
      const notJson = await fetch(`${db}/query`, { method: 'POST', body: 'not json' });
      assert.equal(notJson.status, 400);
      assert.match((await notJson.json()).error.message, /not JSON/);
      await q('create collection big (n int)');
      const exact = await fetch(`${db}/query`, { method: 'POST', body: '{"q": "put big {n: $1}", "params": [9007199254740993]}' });
      assert.equal(exact.status, 200);
      assert.deepEqual((await q('get big')).body.rows, [{ id: 1, n: '9007199254740993' }]);
      assert.equal((await q('drop collection big')).status, 200);
      // ... and a vector's numbers stay numbers (a BigInt there was a 500).
      const far = await fetch(`${db}/near`, { method: 'POST', body: '{"collection": "notes", "field": "embed", "vector": [9007199254740993, 0, 0], "limit": 1, "select": ["title"]}' });
      assert.equal(far.status, 200);
      assert.deepEqual((await far.json()).rows.map((r) => r.title), ['a']);
      // A checkpoint rewrites the file in storage (replace, in one transaction).
      assert.equal((await q('checkpoint')).status, 200);
      assert.equal((await q('put notes {title: $1}', ['c'])).status, 200);
      // Another database is another object, with its own storage.
      assert.equal((await post(`${w.url}/db/other/query`, { q: 'get notes' })).body.error.code, 'not_found');
      await w.stop();

      // A new process: the object opens the file from its storage.
      w = await startWorkerd(dir);
      const again = `${w.url}/db/notes`;
      const rows = (await post(`${again}/query`, { q: 'get notes select title' })).body.rows;
      assert.deepEqual(rows.map((r) => r.title), ['a', 'b', 'c']);
      const near2 = await post(`${again}/near`, { collection: 'notes', field: 'embed', vector: [1, 0, 0], limit: 1, select: ['title'] });
      assert.deepEqual(near2.body.rows.map((r) => r.title), ['a']);
      // Its bytes are a database file the native CLI opens.
      const file = path.join(tempDir(), 'export.kfdb');
      fs.writeFileSync(file, new Uint8Array(await (await fetch(`${again}/export`)).arrayBuffer()));
      assert.deepEqual(cliLines([file, '-c', 'get notes count']), ['{"count":3}']);
    } finally {
      await w.stop();
    }
  });

  test("':memory:', bytes in and export() out, the wasm option, no file system", async () => {
    const dir = project(tarball, path.join(root, 'tests/js/fixtures/workerd-memory'), 'kitfox-workerd-memory-');
    const w = await startWorkerd(dir);
    try {
      const r = await fetch(`${w.url}/`);
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.deepEqual(body, {
        platform: 'workerd',
        near: ['x'],
        match: ['y'],
        exported: true,
        fromBytes: 2,
        nearFromBytes: 'x',
        byName: 'invalid',
        syntax: 'syntax',
      });
    } finally {
      await w.stop();
    }
  });
});
