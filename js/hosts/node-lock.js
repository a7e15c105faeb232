// The writer lock of the Node host. Node has no flock, so a database file is
// locked by something the kernel releases when the process dies, taken before
// the engine opens the file and dropped after it closed it:
//
//   'socket' (the default on Linux): a Unix socket bound in the abstract
//       namespace under a name derived from the database's real path. Binding
//       is atomic and the kernel unbinds it when the process exits or is
//       killed, so there is never a stale lock to clean up. It excludes
//       processes that share the network namespace (one host, or one
//       container).
//   'file' (elsewhere): a lock file NAME.lock created with O_CREAT|O_EXCL
//       ('wx') holding {pid, host, start}. A lock whose process is gone (kill
//       (pid, 0) fails with ESRCH, or on Linux the pid now belongs to a process
//       with another start time) is stale and is taken over; one from another
//       host is never taken over.
//
// Within one process, a second open of the same file is refused too (as with
// flock natively). See docs/wasm.md for the choice.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { kitfoxError } from '../errors.js';

const held = new Set(); // lock keys held by this process

function lockedError(file, detail = 'another process') {
  return kitfoxError('locked', `database '${file}' is locked by ${detail}`);
}

// The key of a database file: its directory's real path and its name, so
// that two spellings of one path (symlinked directories, '..') agree.
function lockKey(file) {
  try {
    return path.join(fs.realpathSync(path.dirname(file)), path.basename(file));
  } catch {
    return file;
  }
}

export async function acquireLock(file, method = 'auto') {
  const key = lockKey(file);
  if (held.has(key)) throw lockedError(file, 'another connection in this process');
  held.add(key); // before any await: two concurrent opens in one process
  try {
    const m = method === 'auto' || method === undefined ? (process.platform === 'linux' ? 'socket' : 'file') : method;
    let inner;
    if (m === 'socket') inner = await socketLock(file, key);
    else if (m === 'file') inner = fileLock(file);
    else throw kitfoxError('invalid', `lock must be 'auto', 'socket' or 'file', got '${m}'`);
    let released = false;
    return {
      method: m,
      release() {
        if (released) return;
        released = true;
        inner.release();
        held.delete(key);
      },
    };
  } catch (e) {
    held.delete(key);
    throw e;
  }
}

// The lock's abstract name, padded with NULs to the whole sun_path (108
// bytes on Linux): the address Node binds for any abstract name, and so the
// one native kitfox binds. Deno binds a name as long as it is given, so it
// is given the padded one; Bun cannot bind a name of 108 bytes through
// node:net (EINVAL), so it binds this one through libc (libcSocketLock).
const SUN_PATH = 108;

async function socketLock(file, key) {
  const short = '\0kitfox-lock:' + crypto.createHash('sha256').update(key).digest('hex');
  const name = short + '\0'.repeat(SUN_PATH - short.length);
  if (process.versions.bun) {
    const libc = await bunLibc();
    if (!libc) throw kitfoxError('io', `taking the writer lock of '${file}': Bun cannot load libc to bind the lock's socket (open with lock: 'file' instead)`);
    return libcSocketLock(file, name, libc);
  }
  if (globalThis.Deno && denoMayUseFfi()) {
    const libc = denoLibc();
    if (libc) return libcSocketLock(file, name, libc);
  }
  return new Promise((resolve, reject) => {
    const server = net.createServer((conn) => conn.destroy());
    server.once('error', (e) => {
      server.close();
      if (e.code === 'EADDRINUSE') reject(lockedError(file));
      else reject(kitfoxError('io', `taking the writer lock of '${file}': ${e.message}`));
    });
    // exclusive: a cluster worker binds its own socket instead of sharing the primary's.
    server.listen({ path: name, exclusive: true }, () => {
      server.unref(); // the lock does not keep the process alive
      resolve({ release: () => server.close() });
    });
  });
}

// socket(2), bind(2) and listen(2) called through the runtime's FFI, with
// the whole sockaddr_un (the family, then the 108 bytes of `name`) and
// SOCK_CLOEXEC, so a child process started meanwhile does not keep the lock:
// Bun's node:net cannot bind the name; Deno's binds it without close-on-exec
// (a child kept the lock after close() and exit), so where Deno may use FFI
// (--allow-ffi) it takes this way. Linux only (the 'socket' lock is): its
// constants and a little-endian sa_family, which every Linux these run on has.
const BUN_FFI = 'bun:ffi'; // not a literal import: bundlers leave it alone
const AF_UNIX = 1, SOCK_STREAM = 1, SOCK_CLOEXEC = 0o2000000, EADDRINUSE = 98;
const LIBC = ['libc.so.6', 'libc.so'];

// libc's calls as {socket, bind, listen, close, errno(), unload()}, or
// null: `dlopen` the runtime's, `describe` a call's types in its words, and
// `errnoOf` reading errno where __errno_location points.
const LIBC_CALLS = {
  socket: [['i32', 'i32', 'i32'], 'i32'],
  bind: [['i32', 'ptr', 'u32'], 'i32'],
  listen: [['i32', 'i32'], 'i32'],
  close: [['i32'], 'i32'],
  __errno_location: [[], 'ptr'],
};
function loadLibc(dlopen, describe, errnoOf) {
  const calls = Object.fromEntries(Object.entries(LIBC_CALLS).map(([name, [args, ret]]) => [name, describe(args, ret)]));
  for (const lib of LIBC) {
    try {
      const l = dlopen(lib, calls);
      const c = l.symbols;
      return { ...c, errno: () => errnoOf(c.__errno_location()), unload: () => l.close() };
    } catch {}
  }
  return null;
}

async function bunLibc() {
  const { dlopen, read } = await import(BUN_FFI);
  return loadLibc(dlopen, (args, returns) => ({ args, returns }), (p) => read.i32(p, 0));
}

function denoLibc() {
  const { Deno } = globalThis;
  return loadLibc(
    Deno.dlopen,
    (args, ret) => ({ parameters: args.map((a) => (a === 'ptr' ? 'buffer' : a)), result: ret === 'ptr' ? 'pointer' : ret }),
    (p) => new Deno.UnsafePointerView(p).getInt32(0),
  );
}

// Whether Deno may call libc (it was given --allow-ffi).
function denoMayUseFfi() {
  try {
    return globalThis.Deno?.permissions?.querySync?.({ name: 'ffi' }).state === 'granted';
  } catch {
    return false;
  }
}

function libcSocketLock(file, name, c) {
  const fail = (what) => {
    const errno = c.errno();
    return errno === EADDRINUSE ? lockedError(file) : kitfoxError('io', `taking the writer lock of '${file}': ${what} failed (errno ${errno})`);
  };
  const fd = c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const e = fail('socket');
    c.unload();
    throw e;
  }
  const addr = new Uint8Array(2 + SUN_PATH);
  addr[0] = AF_UNIX; // sa_family_t, little-endian
  for (let i = 0; i < SUN_PATH; i++) addr[2 + i] = name.charCodeAt(i);
  const bound = c.bind(fd, addr, addr.length) === 0;
  if (!bound || c.listen(fd, 1) !== 0) {
    const e = fail(bound ? 'listen' : 'bind');
    c.close(fd);
    c.unload();
    throw e;
  }
  return {
    release() {
      c.close(fd);
      c.unload();
    },
  };
}

// Linux: the start time of a process (clock ticks since boot), to tell a
// reused pid from the lock's owner. Elsewhere null.
function processStart(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function ownerAlive(raw, lockPath) {
  let owner;
  try {
    owner = JSON.parse(raw);
  } catch {
    // Empty or partial: its creator may be writing it right now, or died
    // doing so. Give a young one the benefit of the doubt.
    try {
      return Date.now() - fs.statSync(lockPath).mtimeMs < 10_000;
    } catch {
      return false;
    }
  }
  if (owner.host !== os.hostname()) return true; // cannot check another host
  try {
    process.kill(owner.pid, 0);
  } catch (e) {
    if (e.code === 'ESRCH') return false;
    // EPERM: alive, someone else's
  }
  if (owner.start != null) {
    const start = processStart(owner.pid);
    if (start !== null && start !== owner.start) return false; // the pid was reused
  }
  return true;
}

function fileLock(file) {
  const lockPath = file + '.lock';
  const me = JSON.stringify({ pid: process.pid, host: os.hostname(), start: processStart(process.pid) });
  for (let attempt = 0; attempt < 5; attempt++) {
    let fd;
    try {
      fd = fs.openSync(lockPath, 'wx', 0o644);
    } catch (e) {
      if (e.code !== 'EEXIST') throw kitfoxError('io', `creating the lock file '${lockPath}': ${e.message}`);
      let raw;
      try {
        raw = fs.readFileSync(lockPath, 'utf8');
      } catch (e2) {
        if (e2.code === 'ENOENT') continue; // released meanwhile
        throw kitfoxError('io', `reading the lock file '${lockPath}': ${e2.message}`);
      }
      if (ownerAlive(raw, lockPath)) {
        let who = 'another process';
        try {
          const o = JSON.parse(raw);
          who = `process ${o.pid} on ${o.host} (lock file '${lockPath}')`;
        } catch {}
        throw lockedError(file, who);
      }
      try {
        fs.unlinkSync(lockPath); // stale: its process is gone
      } catch (e3) {
        if (e3.code !== 'ENOENT') throw kitfoxError('io', `removing the stale lock file '${lockPath}': ${e3.message}`);
      }
      continue;
    }
    try {
      fs.writeSync(fd, me);
    } finally {
      fs.closeSync(fd);
    }
    return {
      release() {
        try {
          if (fs.readFileSync(lockPath, 'utf8') === me) fs.unlinkSync(lockPath);
        } catch {}
      },
    };
  }
  throw lockedError(file, 'another process (its lock file keeps changing)');
}
