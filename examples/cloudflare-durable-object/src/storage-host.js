// A kitfox host (docs/wasm.md, "Host file layers") that keeps the database
// file in a Durable Object's own storage: SQLite-backed Durable Objects have
// a synchronous SQL API (ctx.storage.sql), which is what the engine's file
// calls need. A file is a row in kitfox_files and its bytes are 64 KiB rows
// in kitfox_chunks; missing bytes below the size read as zeros.
//
// Durability: a Durable Object commits its storage writes before any
// response that follows them leaves (its output gate), so `sync` has nothing
// to do, and a write kitfox acknowledged is in storage when the client hears
// of it. `replace` (a checkpoint putting the new image in place) runs in one
// storage transaction, so it is atomic.
//
// Only one instance of a Durable Object runs at a time, so the writer lock
// is a flag in this object.
const CHUNK = 64 * 1024;

function hostError(code, message) {
  return Object.assign(new Error(message), { code });
}

export class StorageHost {
  constructor(storage) {
    this.storage = storage;
    this.sql = storage.sql;
    this.atomicReplace = true;
    this.handles = new Map(); // id -> { ino, exclusive }
    this.locked = new Set(); // inos held exclusively
    this.nextId = 1;
    this.sql.exec('CREATE TABLE IF NOT EXISTS kitfox_files (name TEXT PRIMARY KEY, ino INTEGER NOT NULL UNIQUE, size INTEGER NOT NULL)');
    this.sql.exec('CREATE TABLE IF NOT EXISTS kitfox_chunks (ino INTEGER NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (ino, idx))');
  }

  // The file's { ino, size }, or null.
  _file(name) {
    const rows = this.sql.exec('SELECT ino, size FROM kitfox_files WHERE name = ?', name).toArray();
    return rows.length ? rows[0] : null;
  }

  _handle(id) {
    const h = this.handles.get(id);
    if (!h) throw hostError('invalid', `no open file ${id}`);
    return h;
  }

  _size(ino) {
    const rows = this.sql.exec('SELECT size FROM kitfox_files WHERE ino = ?', ino).toArray();
    return rows.length ? rows[0].size : 0; // a file replaced while open reads as empty
  }

  _setSize(ino, size) {
    this.sql.exec('UPDATE kitfox_files SET size = ? WHERE ino = ?', size, ino);
  }

  _chunk(ino, idx) {
    const rows = this.sql.exec('SELECT data FROM kitfox_chunks WHERE ino = ? AND idx = ?', ino, idx).toArray();
    return rows.length ? new Uint8Array(rows[0].data) : null;
  }

  open(name, create, exclusive) {
    let f = this._file(name);
    if (!f) {
      if (!create) throw hostError('not_found', `no such file: ${name}`);
      const next = this.sql.exec('SELECT COALESCE(MAX(ino), 0) + 1 AS ino FROM kitfox_files').one().ino;
      this.sql.exec('INSERT INTO kitfox_files (name, ino, size) VALUES (?, ?, 0)', name, next);
      f = { ino: next, size: 0 };
    }
    if (exclusive) {
      if (this.locked.has(f.ino)) throw hostError('locked', `database '${name}' is locked by another connection`);
      this.locked.add(f.ino);
    }
    const id = this.nextId++;
    this.handles.set(id, { ino: f.ino, exclusive });
    return id;
  }

  read(id, offset, dest) {
    const { ino } = this._handle(id);
    const size = this._size(ino);
    if (offset >= size) return 0;
    const n = Math.min(dest.length, size - offset);
    dest.fill(0, 0, n);
    const first = Math.floor(offset / CHUNK);
    const last = Math.floor((offset + n - 1) / CHUNK);
    for (const row of this.sql.exec('SELECT idx, data FROM kitfox_chunks WHERE ino = ? AND idx BETWEEN ? AND ?', ino, first, last)) {
      const data = new Uint8Array(row.data);
      const start = row.idx * CHUNK;
      const from = Math.max(offset, start);
      const to = Math.min(offset + n, start + data.length);
      if (to > from) dest.set(data.subarray(from - start, to - start), from - offset);
    }
    return n;
  }

  write(id, offset, src) {
    const { ino } = this._handle(id);
    const end = offset + src.length;
    for (let idx = Math.floor(offset / CHUNK); idx * CHUNK < end; idx++) {
      const start = idx * CHUNK;
      const from = Math.max(offset, start);
      const to = Math.min(end, start + CHUNK);
      let data;
      if (from === start && to === start + CHUNK) {
        data = src.subarray(from - offset, to - offset);
      } else {
        const old = this._chunk(ino, idx);
        data = new Uint8Array(Math.max(old ? old.length : 0, to - start));
        if (old) data.set(old);
        data.set(src.subarray(from - offset, to - offset), from - start);
      }
      this.sql.exec('INSERT OR REPLACE INTO kitfox_chunks (ino, idx, data) VALUES (?, ?, ?)', ino, idx, data);
    }
    if (end > this._size(ino)) this._setSize(ino, end);
  }

  sync(id) {
    this._handle(id); // the output gate commits before any response leaves
  }

  size(id) {
    return this._size(this._handle(id).ino);
  }

  truncate(id, size) {
    const { ino } = this._handle(id);
    if (size < this._size(ino)) {
      const keep = Math.ceil(size / CHUNK);
      this.sql.exec('DELETE FROM kitfox_chunks WHERE ino = ? AND idx >= ?', ino, keep);
      if (size % CHUNK) {
        const last = this._chunk(ino, keep - 1);
        if (last && last.length > size % CHUNK)
          this.sql.exec('UPDATE kitfox_chunks SET data = ? WHERE ino = ? AND idx = ?', last.subarray(0, size % CHUNK), ino, keep - 1);
      }
    }
    this._setSize(ino, size);
  }

  close(id) {
    const h = this.handles.get(id);
    if (!h) return;
    if (h.exclusive) this.locked.delete(h.ino);
    this.handles.delete(id);
  }

  exists(name) {
    return this._file(name) !== null;
  }

  _drop(name) {
    const f = this._file(name);
    if (!f) return;
    this.sql.exec('DELETE FROM kitfox_chunks WHERE ino = ?', f.ino);
    this.sql.exec('DELETE FROM kitfox_files WHERE ino = ?', f.ino);
  }

  remove(name) {
    this._drop(name);
  }

  // `from` takes the place of `to` in one transaction; handles on `from`
  // now name `to`, as after a rename.
  replace(from, to) {
    if (!this._file(from)) throw hostError('not_found', `no such file: ${from}`);
    this.storage.transactionSync(() => {
      this._drop(to);
      this.sql.exec('UPDATE kitfox_files SET name = ? WHERE name = ?', to, from);
    });
  }

  release() {
    this.handles.clear();
    this.locked.clear();
  }
}
