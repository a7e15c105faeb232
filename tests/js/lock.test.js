// Only one process may write a database: a second opener gets a KitfoxError
// with code 'locked', whether the holder is another process or this one.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { Kitfox } from '../../js/index.js';
import { cli, cliLines, root, runCli, startServer, tempDir, within } from './helpers.js';

const dir = tempDir();
const hold = path.join(root, 'tests', 'js', 'fixtures', 'hold.js');
const holders = [];
after(() => {
  for (const c of holders) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); // a failed test leaves none behind
});

// Starts a child that holds `file`; resolves once it has it.
function holder(file, lock) {
  const child = spawn(process.execPath, [hold, file, lock], { stdio: ['pipe', 'pipe', 'inherit'] });
  holders.push(child);
  const lines = [];
  let waiters = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    lines.push(...d.split('\n').filter(Boolean));
    waiters = waiters.filter((w) => !w());
  });
  const waitFor = (word) =>
    within(
      new Promise((resolve, reject) => {
        const check = () => {
          if (lines.includes(word)) return resolve(), true;
          return false;
        };
        if (!check()) waiters.push(check);
        child.once('exit', (code) => reject(new Error(`holder exited (${code}) before '${word}'`)));
      }),
      `the holder never said '${word}'`,
    );
  const exited = new Promise((r) => child.once('exit', r));
  return { child, waitFor, exited };
}

const methods = process.platform === 'linux' ? ['socket', 'file'] : ['file'];

for (const lock of methods) {
  describe(`writer lock (${lock})`, () => {
    test('a second process gets locked; after the holder closes, it opens', async () => {
      const file = path.join(dir, `closed-${lock}.kfdb`);
      const h = holder(file, lock);
      await h.waitFor('ready');
      await assert.rejects(Kitfox.open(file, { lock }), (e) => {
        assert.equal(e.name, 'KitfoxError');
        assert.equal(e.code, 'locked');
        assert.match(e.message, /^locked error: database '.*' is locked by /);
        return true;
      });
      h.child.stdin.write('close\n');
      await h.waitFor('closed');
      h.child.stdin.end();
      await h.exited;
      const db = await Kitfox.open(file, { lock });
      assert.equal(db.query('get t count')[0].count, 1);
      db.close();
    });

    test('a killed holder leaves no lock behind', async () => {
      const file = path.join(dir, `killed-${lock}.kfdb`);
      const h = holder(file, lock);
      await h.waitFor('ready');
      await assert.rejects(Kitfox.open(file, { lock }), { code: 'locked' });
      h.child.kill('SIGKILL');
      await h.exited;
      if (lock === 'file') assert.ok(fs.existsSync(file + '.lock'), 'the dead holder left its lock file');
      const db = await Kitfox.open(file, { lock });
      assert.equal(db.query('get t count')[0].count, 1);
      db.close();
      assert.ok(!fs.existsSync(file + '.lock'));
    });

    test('a second open in the same process is refused', async () => {
      const file = path.join(dir, `same-${lock}.kfdb`);
      const db = await Kitfox.open(file, { lock });
      await assert.rejects(Kitfox.open(file, { lock }), { code: 'locked', message: /in this process/ });
      await assert.rejects(Kitfox.open(path.join(dir, '.', `same-${lock}.kfdb`), { lock }), { code: 'locked' });
      db.close();
      (await Kitfox.open(file, { lock })).close();
    });

    test('a symbolic link to the file is the file: one lock, and a checkpoint keeps the link', async () => {
      const file = path.join(dir, `real-${lock}.kfdb`);
      const link = path.join(dir, `link-${lock}.kfdb`);
      (await Kitfox.open(file, { lock })).close();
      fs.symlinkSync(path.basename(file), link);
      const db = await Kitfox.open(link, { lock });
      db.query('create collection t (n int)');
      db.query('put t {n: 1}');
      await assert.rejects(Kitfox.open(file, { lock }), { code: 'locked' });
      db.checkpoint(); // its new image renamed over the file, not over the link
      db.query('put t {n: 2}');
      db.close();
      assert.ok(fs.lstatSync(link).isSymbolicLink());
      const again = await Kitfox.open(file, { lock });
      assert.deepEqual(again.query('get t select n'), [{ id: 1, n: 1 }, { id: 2, n: 2 }]);
      again.close();
    });
  });
}

test('a lock file of a live process on another host is respected', async () => {
  const file = path.join(dir, 'foreign.kfdb');
  fs.writeFileSync(file + '.lock', JSON.stringify({ pid: 1, host: 'some-other-host', start: null }));
  await assert.rejects(Kitfox.open(file, { lock: 'file' }), { code: 'locked', message: /some-other-host/ });
  fs.unlinkSync(file + '.lock');
  (await Kitfox.open(file, { lock: 'file' })).close();
});

test('an unknown lock method is refused', async () => {
  await assert.rejects(Kitfox.open(path.join(dir, 'x.kfdb'), { lock: 'flock' }), { code: 'invalid' });
});

describe('the native build and Node exclude each other', { skip: process.platform !== 'linux' }, () => {
  test('a CLI holding a database locks Node out, and Node holding it locks the CLI out', async () => {
    const file = path.join(dir, 'shared.kfdb');
    runCli([file, '-c', 'create collection t (n int)']);
    // The CLI opens the database (taking the lock) before it reads a line
    // of stdin (native/cli.cpp, cmd_main), and prints each statement's rows
    // as soon as the statement ran: its first line of output says it holds
    // the lock. No probing, which would race it for the lock.
    const cliHolder = spawn(cli, [file], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    cliHolder.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const exited = new Promise((resolve) => cliHolder.once('close', (code) => resolve(code))); // after its output ended
    const firstLine = new Promise((resolve, reject) => {
      let out = '';
      cliHolder.stdout.setEncoding('utf8').on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
      });
      exited.then((code) => reject(new Error(`the CLI exited (${code}) before any output: ${stderr}`)));
    });
    try {
      cliHolder.stdin.write('get t count;\nput t {n: 1};\n');
      assert.equal(await within(firstLine, 'the CLI never answered its first statement'), '{"count":0}');
      await assert.rejects(Kitfox.open(file), { code: 'locked' });
      cliHolder.stdin.end();
      assert.equal(await within(exited, 'the CLI did not exit after the end of its input'), 0, stderr);
    } finally {
      if (cliHolder.exitCode === null && cliHolder.signalCode === null) cliHolder.kill('SIGKILL'); // a failed test leaves no holder behind
    }
    const db = await Kitfox.open(file);
    db.checkpoint(); // the lock must outlive the side file's rename too
    assert.throws(() => runCli([file, '-c', 'get t count']), (e) => /locked/.test(String(e.stderr)));
    db.close();
    assert.deepEqual(cliLines([file, '-c', 'get t count']), ['{"count":1}']);
  });

  test('through a symbolic link, the CLI and Node lock the one file, and a checkpoint keeps the link', async () => {
    const file = path.join(dir, 'target.kfdb');
    const link = path.join(dir, 'pointer.kfdb');
    runCli([file, '-c', 'create collection t (n int)']);
    fs.symlinkSync(path.basename(file), link);
    const db = await Kitfox.open(file);
    assert.throws(() => runCli([link, '-c', 'get t count']), (e) => /locked/.test(String(e.stderr)));
    db.close();
    // Before, this left the file empty and the link a file of its own.
    assert.deepEqual(cliLines([link, '-c', 'put t {n: 1}', '-c', 'checkpoint']), ['{"id":1}']);
    assert.ok(fs.lstatSync(link).isSymbolicLink());
    assert.deepEqual(cliLines([file, '-c', 'get t count']), ['{"count":1}']);
    const viaLink = await Kitfox.open(link);
    assert.throws(() => runCli([file, '-c', 'get t count']), (e) => /locked/.test(String(e.stderr)));
    viaLink.close();
  });

  test('a database its owner forgot is closed when collected: its writes flushed, its lock let go', async () => {
    // (A Durable Object evicted without a word left its database open in the
    // module, which every instance after it shares; a statement's finalizer
    // held its database forever.)
    const file = path.join(dir, 'forgotten.kfdb');
    const script = `
      import { Kitfox } from ${JSON.stringify(path.join(root, 'js', 'index.js'))};
      const file = ${JSON.stringify(file)};
      {
        const db = await Kitfox.open(file, { sync: 'off' });
        db.query('create collection t (n int)');
        db.prepare('get t count');
        db.query('put t {n: $1}', [1]);
      }
      let again = null;
      for (let i = 0; i < 100000 && !again; i++) {
        globalThis.gc();
        await new Promise((r) => setImmediate(r)); // (a turn of the event loop, where finalizers run)
        try { again = await Kitfox.open(file); } catch (e) { if (e.code !== 'locked') throw e; }
      }
      console.log(again ? JSON.stringify(again.query('get t count')) : 'never closed');`;
    const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await within(new Promise((r) => child.on('exit', r)), 'the child never finished');
    assert.equal(out.trim(), '[{"count":1}]');
  });

  test('a file with hard links is refused by the CLI and Node alike, by either name', async () => {
    // The lock is a path's: by another name the CLI wrote beside Node, and
    // Node's next write landed over the CLI's acknowledged one.
    const file = path.join(dir, 'linked.kfdb');
    const other = path.join(dir, 'second-name.kfdb');
    runCli([file, '-c', 'create collection t (n int)', '-c', 'put t {n: 1}']);
    fs.linkSync(file, other);
    for (const name of [file, other]) {
      assert.throws(() => runCli([name, '-c', 'put t {n: 2}']), (e) => /has 2 names \(hard links\)/.test(String(e.stderr)), name);
      await assert.rejects(Kitfox.open(name), (e) => e.code === 'invalid' && /has 2 names \(hard links\).*give it one name/.test(e.message), name);
    }
    fs.unlinkSync(other);
    assert.deepEqual(cliLines([file, '-c', 'get t select n']), ['{"id":1,"n":1}']);
  });

  test('a native checkpoint that carries writes keeps the lock from the Node package', async () => {
    // `kitfox serve` checkpoints natively: its side file (FILE~~, the writes
    // landing beside it carried after the image) is renamed over the file,
    // and the Node package's lock (a socket, no flock) must still be refused.
    const file = path.join(dir, 'carried.kfdb');
    const s = await startServer(file);
    try {
      const q = (query) =>
        fetch(`${s.url}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
      for (const query of ['create collection t (n int)', 'put t {n: 1}', 'checkpoint', 'put t {n: 2}'])
        assert.equal((await q(query)).status, 200, query);
      await assert.rejects(Kitfox.open(file), { code: 'locked' });
    } finally {
      assert.equal(await s.stop(), 0);
    }
    assert.deepEqual(cliLines([file, '-c', 'get t count']), ['{"count":2}']);
  });
});
