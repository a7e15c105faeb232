// kitfox in Chromium: a dedicated worker over OPFS (kitfox/worker), its
// persistence across a page reload, the writer lock between tabs, the
// checkpoint's copy protocol and its crash recovery, and files that the
// native CLI opens.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { SAFETY_MS, newContext, openPage, reload, root, startBrowser } from './helpers.js';

const cli = path.join(root, 'build', 'kitfox');
let env;
let context;

before(async () => {
  env = await startBrowser();
  context = await newContext(env.browser);
});

after(async () => {
  await env?.stop();
});

test('a database in a worker over OPFS survives a page reload', async () => {
  const page = await openPage(context, env.url);
  const first = await page.evaluate(async () => {
    const db = await kitfox.connect('persist.kfdb');
    await db.query('create collection notes (title text, year int, embed vector<3>)');
    await db.query('put notes {title: $1, year: $2, embed: $3}', ['hello', 2024, new Float32Array([1, 0, 0])]);
    await db.batch([
      ['put notes {title: $1, year: 2025, embed: $2}', ['world', [0, 1, 0]]],
      ['set notes {year: 2026} where title = $1', ['hello']],
    ]);
    const near = await db.near('notes', 'embed', new Float32Array([0.9, 0.1, 0]), { limit: 1, select: ['title'] });
    return { near, timings: db.timings };
    // not closed: the reload ends the worker, as a user's refresh would
  });
  assert.equal(first.near[0].title, 'hello');
  assert.ok(first.timings.openMs >= 0 && first.timings.totalMs >= first.timings.openMs);

  await reload(page);
  const rows = await page.evaluate(async (lockTimeout) => {
    // The old worker lets go of the file (its handles, then its Web Lock)
    // after the reload, asynchronously: wait for that, not at once.
    const db = await kitfox.connect('persist.kfdb', { lockTimeout });
    const rows = await db.query('get notes order id');
    const out = rows.map((r) => ({ ...r, embed: Array.from(r.embed), f32: r.embed instanceof Float32Array }));
    await db.close();
    return out;
  }, SAFETY_MS);
  assert.deepEqual(rows, [
    { id: 1, title: 'hello', year: 2026, embed: [1, 0, 0], f32: true },
    { id: 2, title: 'world', year: 2025, embed: [0, 1, 0], f32: true },
  ]);
  await page.close();
});

test('errors come back as KitfoxError with code and position', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('errors.kfdb');
    const out = {};
    try {
      await db.query('get nothing where');
    } catch (e) {
      out.syntax = { kitfox: e instanceof kitfox.KitfoxError, code: e.code, position: e.position, message: e.message };
    }
    try {
      await db.query('get nothing');
    } catch (e) {
      out.missing = { code: e.code };
    }
    await db.close();
    try {
      await db.query('get nothing');
    } catch (e) {
      out.closed = { code: e.code };
    }
    return out;
  });
  assert.deepEqual(r.syntax, {
    kitfox: true,
    code: 'syntax',
    position: 17,
    message: 'syntax error at 17: expected a value, got end of statement',
  });
  assert.equal(r.missing.code, 'not_found');
  assert.equal(r.closed.code, 'invalid');
  await page.close();
});

test('create: false makes no file for a missing database; a name OPFS cannot hold is refused, as the engine words it', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const said = (p) => p.then((db) => (db.close(), 'opened'), (e) => `${e.code}: ${e.message}`);
    const out = {};
    out.missing = await said(kitfox.connect('missing.kfdb', { create: false }));
    out.missingExclusive = await said(kitfox.connect('missing2.kfdb', { create: false, exclusive: true }));
    out.files = await opfs.list();
    out.nul = await said(kitfox.connect('nul\0.kfdb', { exclusive: true }));
    out.surrogate = await said(kitfox.connect('lone\ud800.kfdb', { exclusive: true }));
    out.dots = await said(kitfox.connect('a/../b.kfdb', { exclusive: true }));
    out.tilde = await said(kitfox.connect('x~', { exclusive: true }));
    out.after = await opfs.list();
    return out;
  });
  assert.equal(r.missing, "not_found: not_found error: database file 'missing.kfdb' does not exist");
  assert.equal(r.missingExclusive, "not_found: not_found error: database file 'missing2.kfdb' does not exist");
  assert.deepEqual(Object.keys(r.files).filter((f) => f.startsWith('missing')), [], 'no NAME, no NAME~');
  assert.equal(r.nul, 'invalid: invalid error: "nul\\u0000.kfdb" is not a valid OPFS database name (it holds a NUL)');
  assert.equal(r.surrogate, 'invalid: invalid error: "lone\\ud800.kfdb" is not a valid OPFS database name (it holds an unpaired UTF-16 surrogate)');
  assert.equal(r.dots, 'invalid: invalid error: "a/../b.kfdb" is not a valid OPFS database name (an empty, \'.\' or \'..\' part)');
  assert.equal(r.tilde, 'invalid: invalid error: "x~" is not a valid OPFS database name (it ends with \'~\', which kitfox keeps for its side file)');
  assert.deepEqual(Object.keys(r.after).filter((f) => /^(nul|lone|b\.kfdb|x)/.test(f)), [], 'nothing made for a refused name');
  await page.close();
});

test('prepared statements in the worker: run with new params, finalize', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('prepared.kfdb');
    await db.query('create collection t (name text, v vector<2>)');
    const put = await db.prepare('put t {name: $1, v: $2}');
    for (let i = 0; i < 3; i++) await put.query([`n${i}`, new Float32Array([i, 1])]);
    const get = await db.prepare('get t where id = $1');
    const row = (await get.query([2]))[0];
    const json = await get.queryJSON([3]);
    await get.finalize();
    let finalized = null;
    try {
      await get.query([1]);
    } catch (e) {
      finalized = e.code;
    }
    await db.close();
    return { text: put.text, name: row.name, vector: row.v instanceof Float32Array ? [...row.v] : null, json, finalized };
  });
  assert.deepEqual(r, {
    text: 'put t {name: $1, v: $2}',
    name: 'n1',
    vector: [1, 1],
    json: ['{"id":3,"name":"n2","v":[2,1]}'],
    finalized: 'invalid',
  });
  await page.close();
});

test('exclusive: a second tab gets locked until the first closes', async () => {
  // Shared connections (the default) are tested in tabs.test.js.
  const a = await openPage(context, env.url);
  const b = await openPage(context, env.url);
  await a.evaluate(async () => {
    window.db = await kitfox.connect('shared.kfdb', { exclusive: true });
    await db.query('create collection t (n int)');
    await db.query('put t {n: 1}');
  });
  // Locked at once: lockTimeout is 0, so a 'locked' error means no wait.
  const err = await b.evaluate(async () => {
    try {
      await kitfox.connect('shared.kfdb', { exclusive: true });
      return null;
    } catch (e) {
      return { kitfox: e instanceof kitfox.KitfoxError, code: e.code, message: e.message };
    }
  });
  assert.deepEqual(err, {
    kitfox: true,
    code: 'locked',
    message: "locked error: database 'shared.kfdb' is locked by another tab or worker",
  });
  await a.evaluate(() => db.close());
  const n = await b.evaluate(async () => {
    const db = await kitfox.connect('shared.kfdb', { exclusive: true });
    const r = await db.query('get t count');
    await db.close();
    return r[0].count;
  });
  assert.equal(n, 1);
  await a.close();
  await b.close();
});

test('a sync access handle held outside kitfox also reads as locked', async () => {
  const page = await openPage(context, env.url);
  const err = await page.evaluate(async () => {
    // A worker that holds the file's sync access handle without a Web Lock.
    const src = `onmessage = async () => {
      const dir = await navigator.storage.getDirectory();
      const fh = await dir.getFileHandle('raw.kfdb', { create: true });
      self.h = await fh.createSyncAccessHandle();
      postMessage('held');
    };`;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    await new Promise((resolve) => {
      w.onmessage = resolve;
      w.postMessage('go');
    });
    try {
      await kitfox.connect('raw.kfdb');
      return null;
    } catch (e) {
      return { code: e.code, message: e.message };
    } finally {
      w.terminate();
    }
  });
  assert.equal(err.code, 'locked');
  await page.close();
});

test('a checkpoint over OPFS copies NAME~ over NAME and leaves no NAME~', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('ckpt.kfdb');
    await db.query('create collection t (n int, s text)');
    for (let i = 0; i < 20; i++) await db.query('put t {n: $1, s: $2}', [i, 'x'.repeat(100)]);
    const before = await db.stats();
    await db.checkpoint();
    const afterCkpt = await db.stats();
    const whileOpen = await opfs.list();
    await db.query('put t {n: 100}');
    await db.checkpoint(); // a second checkpoint goes through the same handles
    await db.close();
    const closed = await opfs.list();
    const db2 = await kitfox.connect('ckpt.kfdb');
    const count = (await db2.query('get t count'))[0].count;
    const stats = await db2.stats();
    await db2.close();
    return { before, afterCkpt, whileOpen, closed, count, open: stats.open };
  });
  assert.ok(r.before.tailRecords >= 20);
  assert.equal(r.afterCkpt.tailRecords, 0);
  assert.equal(r.whileOpen['ckpt.kfdb~'], 0, 'while open, NAME~ is kept empty');
  assert.equal(r.whileOpen['ckpt.kfdb'], r.afterCkpt.fileBytes);
  assert.ok(!('ckpt.kfdb~' in r.closed), 'closing removes NAME~');
  assert.equal(r.count, 21);
  assert.equal(r.open.sideFileRestored, false);
  assert.deepEqual(r.open.warnings, []);
  await page.close();
});

test('a crash in the middle of the copy: the whole NAME~ wins on open', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('crash.kfdb');
    await db.query('create collection t (n int, s text)');
    for (let i = 0; i < 10; i++) await db.query('put t {n: $1, s: $2}', [i, 'old'.repeat(50)]);
    await db.close();
    const old = await opfs.read('crash.kfdb');
    const db2 = await kitfox.connect('crash.kfdb');
    for (let i = 10; i < 40; i++) await db2.query('put t {n: $1, s: $2}', [i, 'new'.repeat(50)]);
    const image = await db2.export(); // checkpoints: a whole image
    await db2.close();
    // What a crash after NAME~ was flushed and half of it copied leaves.
    const torn = old.slice();
    const half = image.subarray(0, Math.floor(image.length / 2));
    const mixed = new Uint8Array(Math.max(torn.length, half.length));
    mixed.set(torn);
    mixed.set(half);
    await opfs.write('crash.kfdb', mixed);
    await opfs.write('crash.kfdb~', image);
    const db3 = await kitfox.connect('crash.kfdb');
    const count = (await db3.query('get t count'))[0].count;
    const last = (await db3.query('get t where n = 39'))[0];
    const stats = await db3.stats();
    const whileOpen = await opfs.list();
    await db3.close();
    const same = (await opfs.read('crash.kfdb')).every((b, i) => b === image[i]);
    return { count, last: last && last.s.slice(0, 3), open: stats.open, whileOpen, closed: await opfs.list(), same, size: image.length };
  });
  assert.equal(r.count, 40);
  assert.equal(r.last, 'new');
  assert.equal(r.open.sideFileRestored, true);
  assert.match(r.open.warnings[0], /finished an interrupted checkpoint/);
  assert.equal(r.whileOpen['crash.kfdb~'], 0);
  assert.equal(r.whileOpen['crash.kfdb'], r.size);
  assert.ok(r.same, 'NAME holds the image of NAME~');
  assert.ok(!('crash.kfdb~' in r.closed));
  await page.close();
});

test('a NAME~ cut short (a checkpoint that never finished) is dropped', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('cut.kfdb');
    await db.query('create collection t (n int)');
    for (let i = 0; i < 5; i++) await db.query('put t {n: $1}', [i]);
    const image = await db.export();
    await db.close();
    await opfs.write('cut.kfdb~', image.subarray(0, image.length - 3));
    const db2 = await kitfox.connect('cut.kfdb');
    const count = (await db2.query('get t count'))[0].count;
    const stats = await db2.stats();
    await db2.close();
    return { count, open: stats.open, closed: await opfs.list() };
  });
  assert.equal(r.count, 5);
  assert.equal(r.open.sideFileRestored, false);
  assert.ok(!('cut.kfdb~' in r.closed));
  await page.close();
});

test('export() bytes open with the native CLI', async () => {
  const page = await openPage(context, env.url);
  const b64 = await page.evaluate(async () => {
    const db = await kitfox.connect('export.kfdb');
    await db.query('create collection notes (title text, embed vector<4> @hnsw(cosine))');
    for (let i = 0; i < 50; i++) await db.query('put notes {title: $1, embed: $2}', [`n${i}`, new Float32Array([1, i / 50, 0, 0.5])]);
    const bytes = await db.export();
    await db.close();
    return opfs.base64(bytes);
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-browser-'));
  try {
    const file = path.join(dir, 'export.kfdb');
    fs.writeFileSync(file, Buffer.from(b64, 'base64'));
    const out = (args) => execFileSync(cli, [file, ...args], { encoding: 'utf8' }).trim();
    assert.equal(out(['-c', 'get notes count']), '{"count":50}');
    assert.equal(out(['-c', 'get notes select title where id = 50']), '{"id":50,"title":"n49"}');
    const near = out(['-c', 'get notes select title near embed $1 limit 1', '--param', '[1, 0.98, 0, 0.5]']);
    assert.match(near, /"title":"n49"/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  await page.close();
});

test('call() runs a module in the worker, with progress; Kitfox.open there uses OPFS', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('gen.kfdb', { module: '/tests/browser/fixtures/gen.js' });
    const progress = [];
    const count = await db.call('load', { n: 2000, dim: 16 }, { onProgress: (p) => progress.push(p.done) });
    const where = await db.call('where');
    const q = new Float32Array(16).fill(0.1);
    const near = await db.near('items', 'embed', q, { limit: 5 });
    await db.close();
    return { count, where, progress, near: near.length, f32: near[0].embed instanceof Float32Array, files: await opfs.list() };
  });
  assert.deepEqual(r.count, { count: 2000 });
  assert.equal(r.where, 'worker');
  assert.equal(r.progress.length, 4);
  assert.equal(r.progress.at(-1), 2000);
  assert.equal(r.near, 5);
  assert.equal(r.f32, true);
  assert.ok(r.files['gen.kfdb'] > 2000 * 16 * 4);
  await page.close();
});

test('a write the browser answers with a count it did not write fails the checkpoint, and nothing is lost', async () => {
  // Chromium's private-window OPFS, out of room, answers 2^32 - 8 and writes
  // nothing: taken as done, a checkpoint copied a cut-off image over the file.
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const db = await kitfox.connect('room.kfdb', { module: '/tests/browser/fixtures/gen.js' });
    await db.call('load', { n: 300, dim: 4 });
    const out = await db.call('checkpointOutOfRoom');
    await db.close();
    const again = await kitfox.connect('room.kfdb');
    const count = (await again.query('get items count'))[0].count;
    await again.close();
    return { ...out, count, files: await opfs.list() };
  });
  assert.equal(r.said?.code, 'io', JSON.stringify(r));
  assert.match(r.said.message, /the browser reported 4294967288 bytes of \d+ \(out of storage space\?\)/);
  assert.equal(r.count, 301);
  assert.equal(r.files['room.kfdb~'], undefined);
  await page.close();
});

test('on a page (no worker), a name is refused with a pointer to kitfox/worker; memory works', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const { Kitfox } = await import('/js/browser.js');
    let err = null;
    try {
      await Kitfox.open('page.kfdb');
    } catch (e) {
      err = { code: e.code, message: e.message };
    }
    const db = await Kitfox.open(':memory:');
    db.query('create collection t (n int)');
    db.query('put t {n: 5}');
    const rows = db.query('get t');
    db.close();
    return { err, rows, platform: Kitfox.platform };
  });
  assert.equal(r.err.code, 'invalid');
  assert.match(r.err.message, /kitfox\/worker/);
  assert.deepEqual(r.rows, [{ id: 1, n: 5 }]);
  assert.equal(r.platform, 'web');
  await page.close();
});

test('readsOnDemand forces how vector tables and graphs are read; a bad value is refused', async () => {
  const page = await openPage(context, env.url);
  const r = await page.evaluate(async () => {
    const out = {};
    const db = await kitfox.connect('reads.kfdb');
    await db.query('create collection v (e vector<8> @hnsw(cosine))');
    for (let i = 0; i < 300; i++) await db.query('put v {e: $1}', [Float32Array.from({ length: 8 }, (_, k) => Math.sin(i * 8 + k))]);
    await db.close();
    const q = new Float32Array(8).fill(0.25);
    for (const readsOnDemand of [true, false]) {
      const d = await kitfox.connect('reads.kfdb', { readsOnDemand });
      out[readsOnDemand] = { chosen: d.timings.readsOnDemand, near: (await d.near('v', 'e', q, { limit: 5 })).map((x) => x.id) };
      await d.close();
    }
    try {
      await kitfox.connect('reads.kfdb', { readsOnDemand: 'yes' });
    } catch (e) {
      out.bad = { code: e.code, message: e.message };
    }
    return out;
  });
  assert.equal(r.true.chosen, true);
  assert.equal(r.false.chosen, false);
  assert.equal(r.true.near.length, 5);
  assert.deepEqual(r.false.near, r.true.near);
  assert.equal(r.bad.code, 'invalid');
  assert.match(r.bad.message, /readsOnDemand must be true or false/);
  await page.close();
});

test('exclusive, a refresh while the worker is busy: locked at once, or wait with lockTimeout', async () => {
  const page = await openPage(context, env.url);
  // A long write in the worker (no await in it: the worker never yields).
  // Each batch posts its progress as it lands: wait for a few of them.
  await page.evaluate(() => {
    window.landed = 0;
    kitfox
      .connect('busy.kfdb', { module: '/tests/browser/fixtures/gen.js', exclusive: true })
      .then((db) => db.call('load', { n: 300000, dim: 64 }, { onProgress: (p) => (window.landed = p.done) }));
  });
  try {
    await page.waitForFunction(() => window.landed >= 2000, null, { timeout: SAFETY_MS });
  } catch (e) {
    assert.fail(`the load never got going: ${await page.evaluate(() => window.landed)} documents in ${SAFETY_MS / 1000} s (${e.message})`);
  }
  // Locked at once (lockTimeout 0) from another tab while the first one
  // certainly still has the database: it has not been reloaded yet.
  const other = await openPage(context, env.url);
  const atOnce = await other.evaluate(async () => {
    try {
      await kitfox.connect('busy.kfdb', { exclusive: true });
      return 'opened';
    } catch (e) {
      return e.code;
    }
  });
  assert.equal(atOnce, 'locked');
  await other.close();
  // The refresh: Chromium may let the busy old worker run on for a while;
  // the reloaded page waits for it with lockTimeout.
  const landedBefore = await page.evaluate(() => window.landed);
  await reload(page);
  const r = await page.evaluate(async (lockTimeout) => {
    const out = {};
    const t0 = performance.now();
    let db = await kitfox.connect('busy.kfdb', { lockTimeout, exclusive: true });
    out.waitedMs = performance.now() - t0;
    out.count = (await db.query('get items count'))[0].count;
    // The database the old worker left is whole and ours alone: a write
    // lands and is all there is after a reopen.
    await db.query('put items {title: "after", n: -1}');
    await db.close();
    db = await kitfox.connect('busy.kfdb', { exclusive: true });
    out.reopened = (await db.query('get items count'))[0].count;
    out.after = (await db.query('get items select title where n = -1')).map((d) => d.title);
    await db.close();
    return out;
  }, SAFETY_MS);
  console.log(`refresh during a long write: the lock came after ${r.waitedMs.toFixed(0)} ms (${r.count} documents had landed, ${landedBefore} before the reload)`);
  assert.ok(r.count >= landedBefore, 'what had landed before the reload is kept');
  assert.ok(r.count > 0 && r.count % 500 === 0, 'whole batches only');
  assert.equal(r.reopened, r.count + 1);
  assert.deepEqual(r.after, ['after']);
  await page.close();
});
