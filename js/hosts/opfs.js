// The OPFS host: a database is a file in the origin private file system,
// read and written through FileSystemSyncAccessHandle, which exists only in
// dedicated workers. The host interface is synchronous (js/hosts/README.md);
// OPFS's directory calls (getFileHandle, createSyncAccessHandle, removeEntry)
// are not, so everything asynchronous happens before the engine opens and
// after it closed:
//
//   OpfsHost.open(name)   takes the writer lock (a Web Lock, then the sync
//                         access handles' own exclusivity) and opens sync
//                         access handles on NAME and on its checkpoint side
//                         file NAME~ (created, empty, when missing);
//   engine calls          read/write/flush/getSize/truncate on those two
//                         handles, all synchronous;
//   release()             closes the handles, then removes an empty NAME~ and
//                         drops the Web Lock (`host.released` settles then).
//
// OPFS has no rename, so `replace(NAME~, NAME)` is the copy protocol of
// core/storage/format.h: the engine has written and flushed NAME~; the host
// copies it over NAME, truncates NAME to its size, flushes NAME, then empties
// NAME~ and flushes it. A crash before NAME is flushed leaves a whole NAME~,
// which wins on the next open (the engine repeats the copy); a crash after it
// leaves NAME whole. Because NAME~ must keep a handle for the next checkpoint,
// it stays on disk while the database is open: an empty NAME~ counts as
// missing (`exists` is false), the same as the engine's "remove".
import { HostError } from '../errors.js';

const COPY_CHUNK = 8 << 20;

// Whether this context can open a database over OPFS.
export function opfsAvailable() {
  return (
    typeof navigator !== 'undefined' &&
    !!navigator.storage &&
    typeof navigator.storage.getDirectory === 'function' &&
    typeof FileSystemFileHandle !== 'undefined' &&
    typeof FileSystemFileHandle.prototype.createSyncAccessHandle === 'function'
  );
}

// Splits 'a/b/c.kfdb' into its directories and file name; refuses empty
// parts, '.', '..', a trailing '~' (the side file's suffix), a NUL (a
// browser cuts the name there, so NAME and NAME~ would be one file) and a
// lone UTF-16 surrogate (no UTF-8 spells it: the engine would name another
// file).
export function splitName(name) {
  const bad = (why) => new HostError('invalid', `invalid error: ${JSON.stringify(name)} is not a valid OPFS database name (${why})`);
  if (name.includes('\0')) throw bad('it holds a NUL');
  if (/\p{Cs}/u.test(name)) throw bad('it holds an unpaired UTF-16 surrogate');
  const parts = name.split('/');
  for (const p of parts) {
    if (p === '' || p === '.' || p === '..') throw bad("an empty, '.' or '..' part");
  }
  const file = parts.pop();
  if (file.endsWith('~')) throw bad("it ends with '~', which kitfox keeps for its side file");
  return { dirs: parts, file };
}

// The directory that holds `name` (created when `create`), or null.
export async function opfsDirectory(name, create) {
  const { dirs, file } = splitName(name);
  let dir = await navigator.storage.getDirectory();
  for (const d of dirs) {
    try {
      dir = await dir.getDirectoryHandle(d, { create });
    } catch (e) {
      if (e && e.name === 'NotFoundError') return { dir: null, file };
      throw e;
    }
  }
  return { dir, file };
}

async function fileHandle(dir, file, create) {
  try {
    return await dir.getFileHandle(file, { create });
  } catch (e) {
    if (e && e.name === 'NotFoundError') return null;
    throw e;
  }
}

function lockedError(name) {
  return new HostError('locked', `locked error: database '${name}' is locked by another tab or worker`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Opens a sync access handle; another holder (a tab whose Web Lock we could
// not see, or one not using kitfox) makes it fail with NoModificationAllowedError,
// retried until `deadline` (performance.now() time).
async function accessHandle(fh, name, deadline) {
  for (;;) {
    try {
      return await fh.createSyncAccessHandle();
    } catch (e) {
      if (e && (e.name === 'NoModificationAllowedError' || e.name === 'InvalidStateError')) {
        if (performance.now() < deadline) {
          await sleep(25);
          continue;
        }
        throw lockedError(name);
      }
      throw new HostError('io', `io error: opening '${name}' over OPFS: ${e && e.message ? e.message : e}`);
    }
  }
}

// Takes the Web Lock named for the database: at once (`timeout` 0), or
// waiting up to `timeout` ms. Returns its release function, or null when
// another tab or worker holds it.
function webLock(name, timeout) {
  if (typeof navigator === 'undefined' || !navigator.locks) return Promise.resolve(() => {});
  const options = timeout > 0 ? { signal: AbortSignal.timeout(timeout) } : { ifAvailable: true };
  return new Promise((resolve, reject) => {
    navigator.locks
      .request(`kitfox:${name}`, options, (lock) => {
        if (!lock) {
          resolve(null);
          return undefined;
        }
        return new Promise((release) => resolve(release)); // held until release() is called
      })
      .catch((e) => (e && (e.name === 'TimeoutError' || e.name === 'AbortError') ? resolve(null) : reject(e)));
  });
}

// True when small reads through `handle` are slow: 8 reads of 4 KiB take
// over 1 ms in all (0.02 ms from a file on disk, 2.5 ms from a private
// window's in-memory OPFS; the clock may be coarsened to 0.1 ms).
function slowReads(handle) {
  const size = handle.getSize();
  if (size < 64 << 10) return false;
  const buf = new Uint8Array(4096);
  const t0 = performance.now();
  for (let i = 0; i < 8; i++) handle.read(buf, { at: Math.floor((size - 4096) * (i / 8)) });
  return performance.now() - t0 > 1;
}

function ioError(e, what) {
  if (e instanceof HostError) return e;
  return new HostError('io', `${what}: ${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`);
}

// The bytes a sync access handle says it read or wrote of `left`: a count
// out of 1..left is a failure. Out of room, Chromium's private-window OPFS
// neither throws nor answers 0 but 2^32 - 8 (its error -8, unsigned), and
// a write taken as whole let a checkpoint copy a cut-off image over the
// database.
function counted(n, left, what) {
  if (Number.isInteger(n) && n > 0 && n <= left) return n;
  throw new HostError('io', `${what}: the browser reported ${n} bytes of ${left} (out of storage space?)`);
}

export class OpfsHost {
  // Use OpfsHost.open().
  constructor(name, dir, file, entries, unlock, readsOnDemand) {
    this.atomicReplace = false;
    // How the engine reads vector tables and graphs (core/file.h
    // read_chunk): block by block on first use when a read call is cheap,
    // as in a normal browser profile, where OPFS is a file on disk (a few
    // microseconds a call); in one call on open when every call is slow, as
    // in a private window, whose OPFS lives in memory behind an IPC hop
    // (about 0.3 ms a call in Chromium) and a first `near` would make a few
    // thousand of them: then only the block checks wait for first use.
    // The open option `readsOnDemand` (true or false) chooses instead of
    // the timed reads.
    const onDemand = readsOnDemand ?? !slowReads(entries.get(name).handle);
    this.readChunk = onDemand ? 0 : Number.MAX_SAFE_INTEGER;
    this.name = name;
    this.dir = dir;
    this.fileName = file;
    this.entries = entries; // engine name -> { name, handle, present }
    this.unlock = unlock;
    this.ids = new Map(); // file id -> entry
    this.nextId = 1;
    this.released = null; // a Promise once release() ran
  }

  // Takes the lock and opens the handles of `name` (an OPFS path such as
  // 'notes.kfdb' or 'app/notes.kfdb'). `create: false` refuses a missing
  // database; `lockTimeout` (ms, default 0) waits that long for another
  // holder to let go; `readsOnDemand` (true: block by block on first use,
  // false: the whole file on open; default: timed, see the constructor)
  // says how vector tables and graphs are read. Throws HostError: 'locked',
  // 'not_found', 'invalid' or 'io'.
  static async open(name, { create = true, lockTimeout = 0, readsOnDemand } = {}) {
    if (readsOnDemand !== undefined && typeof readsOnDemand !== 'boolean')
      throw new HostError('invalid', `invalid error: readsOnDemand must be true or false, got ${String(readsOnDemand)}`);
    const deadline = performance.now() + lockTimeout;
    const unlock = await webLock(name, lockTimeout);
    if (!unlock) throw lockedError(name);
    const handles = [];
    try {
      const { dir, file } = await opfsDirectory(name, create);
      if (!dir) throw new HostError('not_found', `not_found error: database file '${name}' does not exist`);
      // Both files' handles are asked for at once (each is a round trip to
      // the browser's storage process).
      // create: false makes nothing for a missing database, not even NAME~.
      let [main, side] = await Promise.all([fileHandle(dir, file, false), fileHandle(dir, file + '~', create)]);
      if (!main && !side) throw new HostError('not_found', `not_found error: database file '${name}' does not exist`);
      if (!side) side = await fileHandle(dir, file + '~', true); // NAME is there: its side file is made
      let sideHandle;
      let mainHandle = null;
      if (main) {
        const got = await Promise.allSettled([accessHandle(side, name, deadline), accessHandle(main, name, deadline)]);
        for (const g of got) if (g.status === 'fulfilled') handles.push(g.value);
        for (const g of got) if (g.status === 'rejected') throw g.reason;
        [sideHandle, mainHandle] = got.map((g) => g.value);
      } else {
        sideHandle = await accessHandle(side, name, deadline);
        handles.push(sideHandle);
      }
      const sideSize = sideHandle.getSize();
      const existed = !!main; // made here: a new database, not an empty file
      if (!main) {
        // A whole NAME~ without NAME (a crash in a first checkpoint's copy is
        // not possible, but a user may have deleted NAME): the engine decides.
        if (!create && sideSize === 0) throw new HostError('not_found', `not_found error: database file '${name}' does not exist`);
        main = await fileHandle(dir, file, true);
        mainHandle = await accessHandle(main, name, deadline);
        handles.push(mainHandle);
      }
      const entries = new Map([
        [name, { name, handle: mainHandle, present: existed }],
        [name + '~', { name: name + '~', handle: sideHandle, present: sideSize > 0 }],
      ]);
      return new OpfsHost(name, dir, file, entries, unlock, readsOnDemand);
    } catch (e) {
      for (const h of handles) h.close();
      unlock();
      throw ioError(e, `io error: opening '${name}' over OPFS`);
    }
  }

  entry(id) {
    const e = this.ids.get(id);
    if (!e) throw new HostError('invalid', `no open file ${id}`);
    return e;
  }

  open(name, create) {
    const e = this.entries.get(name);
    if (!e) throw new HostError('invalid', `the OPFS host of '${this.name}' cannot open '${name}'`);
    if (!e.present && !create) throw new HostError('not_found', `file '${name}' does not exist`);
    e.present = true;
    const id = this.nextId++;
    this.ids.set(id, e);
    return id;
  }

  read(id, offset, dest) {
    const e = this.entry(id);
    let done = 0;
    try {
      while (done < dest.length) {
        const n = e.handle.read(done ? dest.subarray(done) : dest, { at: offset + done });
        if (n === 0) break;
        done += counted(n, dest.length - done, `read '${e.name}'`);
      }
    } catch (err) {
      throw ioError(err, `read '${e.name}'`);
    }
    return done;
  }

  write(id, offset, src) {
    const e = this.entry(id);
    let done = 0;
    try {
      while (done < src.length) {
        const n = e.handle.write(done ? src.subarray(done) : src, { at: offset + done });
        done += counted(n, src.length - done, `write '${e.name}'`);
      }
    } catch (err) {
      throw ioError(err, `write '${e.name}'`);
    }
  }

  sync(id) {
    const e = this.entry(id);
    try {
      e.handle.flush();
    } catch (err) {
      throw ioError(err, `flush '${e.name}'`);
    }
  }

  size(id) {
    const e = this.entry(id);
    try {
      return e.handle.getSize();
    } catch (err) {
      throw ioError(err, `size of '${e.name}'`);
    }
  }

  truncate(id, size) {
    const e = this.entry(id);
    try {
      e.handle.truncate(size);
    } catch (err) {
      throw ioError(err, `truncate '${e.name}'`);
    }
  }

  // The handles stay open until release(): closing an id only forgets it.
  close(id) {
    this.ids.delete(id);
  }

  exists(name) {
    const e = this.entries.get(name);
    return !!e && e.present;
  }

  // Empties the file: it cannot be deleted while its handle is open (release
  // deletes an empty NAME~), and an empty file counts as missing.
  remove(name) {
    const e = this.entries.get(name);
    if (!e || !e.present) return;
    try {
      e.handle.truncate(0);
      e.handle.flush();
    } catch (err) {
      throw ioError(err, `remove '${name}'`);
    }
    e.present = false;
  }

  // The copy protocol (see the top of this file): `from` is flushed already.
  replace(from, to) {
    const src = this.entries.get(from);
    const dst = this.entries.get(to);
    if (!src || !dst || src === dst) throw new HostError('invalid', `the OPFS host cannot replace '${to}' with '${from}'`);
    if (!src.present) throw new HostError('not_found', `file '${from}' does not exist`);
    try {
      const size = src.handle.getSize();
      const buf = new Uint8Array(Math.min(COPY_CHUNK, Math.max(size, 1)));
      for (let off = 0; off < size; ) {
        const want = Math.min(buf.length, size - off);
        const view = want === buf.length ? buf : buf.subarray(0, want);
        let got = 0;
        while (got < want) {
          const n = src.handle.read(view.subarray(got), { at: off + got });
          if (n === 0) throw new HostError('io', `'${from}' ended at ${off + got} while copying it (${size} bytes)`);
          got += counted(n, want - got, `read '${from}'`);
        }
        let put = 0;
        while (put < want) {
          const n = dst.handle.write(view.subarray(put), { at: off + put });
          put += counted(n, want - put, `write '${to}'`);
        }
        off += want;
      }
      dst.handle.truncate(size);
      dst.handle.flush();
      dst.present = true;
      src.handle.truncate(0);
      src.handle.flush();
      src.present = false;
    } catch (err) {
      throw ioError(err, `copy '${from}' over '${to}'`);
    }
    // A handle open on `from` now refers to `to`, as after a rename (the
    // engine goes on writing through the side file's handle, core/file.h).
    for (const [id, e] of this.ids) if (e === src) this.ids.set(id, dst);
  }

  // Called once the database is closed: closes the handles, removes an empty
  // NAME~, then drops the Web Lock. `released` settles when all is done.
  release() {
    if (this.released) return;
    this.ids.clear();
    let sideEmpty = false;
    for (const e of this.entries.values()) {
      try {
        if (e.name !== this.name) sideEmpty = e.handle.getSize() === 0;
        e.handle.close();
      } catch {
        // nothing to report to: the engine closed already
      }
    }
    const side = this.fileName + '~';
    this.released = (sideEmpty ? this.dir.removeEntry(side).catch(() => {}) : Promise.resolve()).finally(() => this.unlock());
  }
}
