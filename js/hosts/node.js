// The Node.js host: a database is a real file, read and written with fs's
// synchronous calls (the engine's file layer is synchronous):
//
//   read/write  readSync/writeSync at an offset, looping over short transfers
//   sync        fdatasyncSync
//   size        fstatSync;  truncate: ftruncateSync
//   open        openSync 'r+', or 'wx+' to create (then the directory is synced)
//   replace     renameSync, then fsync of the directory
//
// Only one process may write a database. Node has no flock, so the writer
// lock is taken before the engine opens the file (see lock.js and
// docs/wasm.md): the host allows the engine's exclusive opens of the database
// file and its checkpoint side file `NAME~` only because it holds that lock.
import fs from 'node:fs';
import path from 'node:path';

import { HostError } from '../errors.js';

// Like the native file layer: only a missing database file opened without
// `create` is not_found (open() says so itself); any other failure is io.
function ioError(e, what) {
  if (e instanceof HostError) return e;
  return new HostError('io', `${what}: ${e && e.message ? e.message : e}`);
}

// Makes a directory entry (a new file, a rename) durable. Some platforms
// cannot open or sync a directory: there is nothing more to do there.
function syncDir(dir) {
  let fd;
  try {
    fd = fs.openSync(dir, 'r');
  } catch (e) {
    // Where a directory cannot be opened to flush it (Windows), nothing
    // more to do; anything else (no descriptor left, EMFILE) is a failed
    // flush, as natively: a rename it leaves unflushed is not durable.
    if (['EISDIR', 'EPERM', 'EACCES', 'ENOTSUP'].includes(e.code)) return;
    throw ioError(e, `open directory '${dir}'`);
  }
  try {
    fs.fsyncSync(fd);
  } catch (e) {
    if (!['EINVAL', 'EISDIR', 'EPERM', 'EBADF', 'ENOTSUP'].includes(e.code)) throw ioError(e, `fsync directory '${dir}'`);
  } finally {
    fs.closeSync(fd);
  }
}

const CHUNK = 1 << 30; // one readSync/writeSync moves at most this much

// The words of a refusal of a file with hard links, as native kitfox says them.
const hardLinked = (name, links) =>
  `database '${name}' has ${links} names (hard links): another process could open it by another name beside this one, and a checkpoint replaces the file under one name only; give it one name (copy it)`;

export class NodeHost {
  // `file` is the absolute path of the database; `lock` the writer lock held for it.
  constructor(file, lock) {
    this.atomicReplace = true;
    this.file = file;
    this.lock = lock;
    this.handles = new Map(); // id -> { fd, name }
    this.nextId = 1;
  }

  handle(id) {
    const h = this.handles.get(id);
    if (!h) throw new HostError('invalid', `no open file ${id}`);
    return h;
  }

  // A database with more than one name (hard links) is refused: the lock
  // is its path's, so a process opening it by another name would write
  // beside this one, and a checkpoint replaces the file under one name only.
  open(name, create, exclusive) {
    if (exclusive && name !== this.file && name !== this.file + '~~')
      throw new HostError('invalid', `no writer lock covers '${name}'`);
    let fd;
    try {
      fd = fs.openSync(name, 'r+');
    } catch (e) {
      if (e.code !== 'ENOENT') throw ioError(e, `open '${name}'`);
      if (!create) throw new HostError('not_found', `file '${name}' does not exist`);
      try {
        fd = fs.openSync(name, 'wx+', 0o644);
        syncDir(path.dirname(name));
      } catch (e2) {
        if (e2 instanceof HostError) throw e2;
        if (e2.code !== 'EEXIST') throw ioError(e2, `create '${name}'`);
        fd = fs.openSync(name, 'r+'); // another opener made it meanwhile
      }
    }
    if (exclusive) {
      const links = fs.fstatSync(fd).nlink;
      if (links > 1) {
        fs.closeSync(fd);
        throw new HostError('invalid', hardLinked(name, links));
      }
    }
    const id = this.nextId++;
    this.handles.set(id, { fd, name });
    return id;
  }

  read(id, offset, dest) {
    const h = this.handle(id);
    let done = 0;
    try {
      while (done < dest.length) {
        const n = fs.readSync(h.fd, dest, done, Math.min(dest.length - done, CHUNK), offset + done);
        if (n === 0) break;
        done += n;
      }
    } catch (e) {
      throw ioError(e, `read '${h.name}'`);
    }
    return done;
  }

  write(id, offset, src) {
    const h = this.handle(id);
    let done = 0;
    try {
      while (done < src.length) {
        const n = fs.writeSync(h.fd, src, done, Math.min(src.length - done, CHUNK), offset + done);
        if (n === 0) throw new HostError('io', `write '${h.name}': no progress (disk full?)`);
        done += n;
      }
    } catch (e) {
      throw ioError(e, `write '${h.name}'`);
    }
  }

  sync(id) {
    const h = this.handle(id);
    try {
      fs.fdatasyncSync(h.fd);
    } catch (e) {
      throw ioError(e, `fdatasync '${h.name}'`);
    }
  }

  size(id) {
    const h = this.handle(id);
    try {
      return fs.fstatSync(h.fd).size;
    } catch (e) {
      throw ioError(e, `fstat '${h.name}'`);
    }
  }

  truncate(id, size) {
    const h = this.handle(id);
    try {
      fs.ftruncateSync(h.fd, size);
    } catch (e) {
      throw ioError(e, `ftruncate '${h.name}'`);
    }
  }

  close(id) {
    const h = this.handles.get(id);
    if (!h) return;
    this.handles.delete(id);
    fs.closeSync(h.fd);
  }

  exists(name) {
    try {
      return fs.statSync(name, { throwIfNoEntry: false }) !== undefined;
    } catch (e) {
      throw ioError(e, `stat '${name}'`);
    }
  }

  remove(name) {
    try {
      fs.unlinkSync(name);
    } catch (e) {
      if (e.code !== 'ENOENT') throw ioError(e, `unlink '${name}'`);
    }
  }

  replace(from, to) {
    try {
      fs.renameSync(from, to);
    } catch (e) {
      throw ioError(e, `rename '${from}' to '${to}'`);
    }
    // A handle open on it goes with it: its errors name the file now.
    for (const h of this.handles.values()) if (h.name === from) h.name = to;
    syncDir(path.dirname(to)); // (its failure: renamed, but not known durable)
    if (path.dirname(from) !== path.dirname(to)) syncDir(path.dirname(from));
  }

  // Called once the database is closed: closes what is left, drops the lock.
  release() {
    for (const id of [...this.handles.keys()]) this.close(id);
    this.lock.release();
  }
}
