// The memory host: files are byte arrays in JS memory. Used for ':memory:',
// for a database opened from a Uint8Array, and wherever there is no file
// system (edge runtimes). It is also the smallest example of the host
// interface that every host implements (see js/hosts/README.md).
import { HostError } from '../errors.js';

export class MemoryHost {
  constructor() {
    this.atomicReplace = true;
    this.files = new Map(); // name -> { bytes: Uint8Array (capacity), size, locked }
    this.handles = new Map(); // file id -> { file, exclusive }
    this.nextId = 1;
  }

  // Puts a file in place before the database opens (a copy of `bytes`).
  addFile(name, bytes) {
    this.files.set(name, { bytes: new Uint8Array(bytes), size: bytes.length, locked: false });
  }

  // A copy of a file's bytes.
  readFile(name) {
    const f = this.files.get(name);
    return f ? f.bytes.slice(0, f.size) : null;
  }

  file(id) {
    const h = this.handles.get(id);
    if (!h) throw new HostError('invalid', `no open file ${id}`);
    return h.file;
  }

  open(name, create, exclusive) {
    let f = this.files.get(name);
    if (!f) {
      if (!create) throw new HostError('not_found', `no such file: ${name}`);
      f = { bytes: new Uint8Array(0), size: 0, locked: false };
      this.files.set(name, f);
    }
    if (exclusive) {
      if (f.locked) throw new HostError('locked', `database '${name}' is locked by another connection`);
      f.locked = true;
    }
    const id = this.nextId++;
    this.handles.set(id, { file: f, exclusive });
    return id;
  }

  read(id, offset, dest) {
    const f = this.file(id);
    if (offset >= f.size) return 0;
    const n = Math.min(dest.length, f.size - offset);
    dest.set(f.bytes.subarray(offset, offset + n));
    return n;
  }

  write(id, offset, src) {
    const f = this.file(id);
    const end = offset + src.length;
    if (end > f.bytes.length) {
      const b = new Uint8Array(Math.max(end, Math.min(f.bytes.length * 2, f.bytes.length + (64 << 20))));
      b.set(f.bytes.subarray(0, f.size));
      f.bytes = b;
    }
    if (offset > f.size) f.bytes.fill(0, f.size, offset);
    f.bytes.set(src, offset);
    if (end > f.size) f.size = end;
  }

  sync(id) {
    this.file(id);
  }

  size(id) {
    return this.file(id).size;
  }

  truncate(id, size) {
    const f = this.file(id);
    if (size > f.bytes.length) {
      const b = new Uint8Array(size);
      b.set(f.bytes.subarray(0, f.size));
      f.bytes = b;
    } else if (size > f.size) {
      f.bytes.fill(0, f.size, size);
    } else if (size < f.bytes.length / 4) {
      f.bytes = f.bytes.slice(0, size); // give memory back after a big shrink
    }
    f.size = size;
  }

  close(id) {
    const h = this.handles.get(id);
    if (!h) return;
    if (h.exclusive) h.file.locked = false;
    this.handles.delete(id);
  }

  exists(name) {
    return this.files.has(name);
  }

  remove(name) {
    this.files.delete(name);
  }

  replace(from, to) {
    const f = this.files.get(from);
    if (!f) throw new HostError('not_found', `no such file: ${from}`);
    this.files.set(to, f);
    this.files.delete(from);
  }

  // Called once the database is closed.
  release() {
    this.handles.clear();
  }
}
