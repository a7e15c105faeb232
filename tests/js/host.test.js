// The open options for runtimes the package does not know: `host`, a file
// layer of the application's (docs/wasm.md, "Host file layers"), and
// `wasm`, the module handed in (compiled, bytes or URL).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { HostError, Kitfox, KitfoxError } from '../../js/index.js';
import { MemoryHost } from '../../js/hosts/memory.js';
import { root, within } from './helpers.js';

const run = promisify(execFile);

// An application's host: files kept in a Map it owns (as a Durable Object
// keeps them in its storage), counting the calls it gets.
class MapHost extends MemoryHost {
  constructor(files) {
    super();
    this.files = files;
    this.calls = {};
    for (const m of ['open', 'read', 'write', 'sync', 'replace', 'release']) {
      const f = this[m].bind(this);
      this[m] = (...args) => {
        this.calls[m] = (this.calls[m] ?? 0) + 1;
        return f(...args);
      };
    }
  }
}

test('a host keeps the file in its own storage across opens', async () => {
  const storage = new Map();
  let host = new MapHost(storage);
  let db = await Kitfox.open('app.kfdb', { host, sync: 'always' });
  db.query('create collection t (title text, embed vector<2>)');
  db.query('put t {title: $1, embed: $2}', ['a', [1, 0]]);
  db.checkpoint(); // replace: the new image in place of the file
  db.query('put t {title: $1, embed: $2}', ['b', [0, 1]]);
  db.close(); // may checkpoint again (the tail is over a quarter of this small image)
  assert.ok(host.calls.write > 0 && host.calls.sync > 0 && host.calls.replace >= 1 && host.calls.release === 1, JSON.stringify(host.calls));
  assert.deepEqual([...storage.keys()], ['app.kfdb']);

  host = new MapHost(storage);
  db = await Kitfox.open('app.kfdb', { host });
  assert.deepEqual(db.query('get t select title').map((r) => r.title), ['a', 'b']);
  assert.equal(db.near('t', 'embed', [0, 1], { limit: 1 })[0].title, 'b');
  db.close();
  // The bytes are a database file as any other.
  const again = await Kitfox.open(storage.get('app.kfdb').bytes.slice(0, storage.get('app.kfdb').size));
  assert.equal(again.query('get t count')[0].count, 2);
  again.close();
});

test('a host is checked, and its errors become KitfoxError', async () => {
  await assert.rejects(Kitfox.open('x.kfdb', { host: { atomicReplace: true, open() {} } }), (e) => e instanceof KitfoxError && e.code === 'invalid' && /no read, write, sync/.test(e.message));
  await assert.rejects(Kitfox.open(':memory:', { host: new MemoryHost() }), (e) => e.code === 'invalid');
  const locked = new MemoryHost();
  locked.open = () => {
    throw new HostError('locked', 'held by another instance');
  };
  await assert.rejects(Kitfox.open('x.kfdb', { host: locked }), (e) => e instanceof KitfoxError && e.code === 'locked' && /held by another instance/.test(e.message));
  const plain = new MemoryHost();
  plain.open = () => {
    throw { code: 'whatever', message: 'disk on fire' }; // any other code is io
  };
  await assert.rejects(Kitfox.open('x.kfdb', { host: plain }), (e) => e.code === 'io' && /disk on fire/.test(e.message));
});

test('a host call that gives back what it must not fails with invalid, and loses nothing', async () => {
  // A database with one document, kept in storage the broken hosts share.
  const storage = new Map();
  const good = await Kitfox.open('app.kfdb', { host: new MapHost(storage), sync: 'always' });
  good.query('create collection t (n int)');
  good.query('put t {n: 1}');
  good.close();
  const bytes = () => storage.get('app.kfdb').bytes.slice(0, storage.get('app.kfdb').size);
  const before = bytes();
  // Another database, open all along: a broken host never takes it down.
  const other = await Kitfox.open(':memory:');
  other.query('create collection o (n int)');
  const broken = {
    // An async host: its Promises are no answers (and their rejections
    // are not left unhandled).
    'an async size': (h) => (h.size = async () => { throw new Error('later'); }),
    'an async open': (h) => (h.open = async () => 1),
    'a size of undefined': (h) => { const size = h.size.bind(h); h.size = (id) => void size(id); },
    'a BigInt size': (h) => { const size = h.size.bind(h); h.size = (id) => BigInt(size(id)); },
    'a read past dest': (h) => (h.read = (id, off, dest) => dest.length + 1),
    'exists as a number': (h) => (h.exists = () => 1),
  };
  const said = {
    'an async size': /the host's size returned a Promise: a host's calls are synchronous/,
    'an async open': /the host's open returned a Promise/,
    'a size of undefined': /the host's size returned undefined, not the size in bytes/,
    'a BigInt size': /the host's size returned the BigInt \d+n?, not the size/,
    'a read past dest': /the host's read returned \d+, not the number of bytes read/,
    'exists as a number': /the host's exists returned 1, not true or false/,
  };
  for (const [name, breakIt] of Object.entries(broken)) {
    const host = new MapHost(storage);
    breakIt(host);
    await assert.rejects(Kitfox.open('app.kfdb', { host }), (e) => e instanceof KitfoxError && e.code === 'invalid' && said[name].test(e.message), name);
    assert.deepEqual(bytes(), before, `${name}: the file is as it was`);
    other.query('put o {n: 1}');
  }
  assert.deepEqual(other.query('get o count'), [{ count: Object.keys(broken).length }]);
  other.close();
  const again = await Kitfox.open('app.kfdb', { host: new MapHost(storage) });
  assert.deepEqual(again.query('get t'), [{ id: 1, n: 1 }]);
  again.close();
});

// The module loads once per process: each case is a fresh one.
async function fresh(code) {
  const { stdout } = await within(run(process.execPath, ['--input-type=module', '-e', code], { cwd: root }), 'node never finished');
  return JSON.parse(stdout);
}

test('the wasm option: a compiled module, or its bytes; anything else is refused', async () => {
  const prelude = `import fs from 'node:fs'; import { Kitfox } from './js/index.js'; const bytes = fs.readFileSync('dist/kitfox-core.wasm');`;
  const use = `const db = await Kitfox.open(':memory:', { wasm }); db.query('create collection t (n int)'); db.query('put t {n: 5}'); console.log(JSON.stringify(db.query('get t')));`;
  assert.deepEqual(await fresh(`${prelude} const wasm = await WebAssembly.compile(bytes); ${use}`), [{ id: 1, n: 5 }]);
  assert.deepEqual(await fresh(`${prelude} const wasm = new Uint8Array(bytes); ${use}`), [{ id: 1, n: 5 }]);
  assert.deepEqual(
    await fresh(`${prelude} try { await Kitfox.open(':memory:', { wasm: 42 }); } catch (e) { console.log(JSON.stringify([e.code, e.message])); }`),
    ['invalid', 'invalid error: the wasm option takes a WebAssembly.Module, its bytes or a URL, got 42'],
  );
});

test("NodeHost: a handle renamed by replace() names the file it became", async () => {
  const { NodeHost } = await import('../../js/hosts/node.js');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-host-'));
  try {
    const file = path.join(dir, 'r.kfdb');
    const host = new NodeHost(file, { release() {} });
    const id = host.open(`${file}~~`, true, true);
    host.replace(`${file}~~`, file);
    // An error on it now (its descriptor closed under it) names the file.
    fs.closeSync(host.handles.get(id).fd);
    assert.throws(() => host.read(id, 0, new Uint8Array(1)), (e) => e.message.includes(`'${file}'`) && !e.message.includes('~~'));
    host.handles.delete(id);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
