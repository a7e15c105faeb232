// kitfox: an embedded document database, here as a WebAssembly module. The
// Kitfox class, shared by every entry point: js/index.js (Node, Deno, Bun),
// js/browser.js (browsers, workers, bundlers) and js/workerd.js (Cloudflare
// Workers) pick the platform layer (js/platform/) before any open.
//
//   import { Kitfox } from 'kitfox';
//   const db = await Kitfox.open('notes.kfdb');       // or ':memory:', or a Uint8Array
//   db.query('create collection notes (title text, embed vector<3>)');
//   db.query('put notes {title: $1, embed: $2}', ['hello', new Float32Array([1, 0, 0])]);
//   const rows = db.query('get notes where title = $1', ['hello']);
//   db.close();
//
// See kitfox.d.ts for the whole API and docs/wasm.md for how values map.
import { decodeRowsAt, decodeBatch, encodeBatch, encodeParamsShared, copyShared, wellFormed } from './codec.js';
import { loadCore, trapped } from './core.js';
import { HostError, KitfoxError, kitfoxError } from './errors.js';
import { MemoryHost } from './hosts/memory.js';
import { nearStatement } from './statements.js';
import { currentPlatform } from './platform/current.js';

export { HostError, KitfoxError };

// The methods a host given with the `host` open option must have
// (js/hosts/README.md, docs/wasm.md "Host file layers").
const HOST_METHODS = ['open', 'read', 'write', 'sync', 'size', 'truncate', 'close', 'exists', 'remove', 'replace'];

function checkHost(host) {
  if (host === null || typeof host !== 'object') throw kitfoxError('invalid', 'the host option must be an object (see docs/wasm.md, "Host file layers")');
  const missing = HOST_METHODS.filter((m) => typeof host[m] !== 'function');
  if (missing.length) throw kitfoxError('invalid', `the host has no ${missing.join(', ')} method${missing.length > 1 ? 's' : ''} (see docs/wasm.md, "Host file layers")`);
  if (typeof host.atomicReplace !== 'boolean') throw kitfoxError('invalid', 'the host must say whether replace is atomic: atomicReplace = true or false');
  return host;
}

const FLAG_PARAMS_JSON = 1;
const FLAG_ROWS_JSON = 2;
const MEMORY_NAME = 'memory.kfdb';
const utf8 = new TextEncoder();

function syncOption(sync) {
  if (sync === undefined || sync === null) return '';
  if (sync === 'always' || sync === 'off') return sync;
  if (typeof sync === 'number' && Number.isInteger(sync) && sync >= 0) return String(sync);
  if (typeof sync === 'string') return sync; // '250' or '250ms': the engine checks it
  throw kitfoxError('invalid', `sync must be 'always', 'off' or a period in milliseconds, got ${String(sync)}`);
}

// The prepared statements query() and near() keep, by text, most recently
// used last: a statement run again as text costs what a prepared one does
// (no text copied into the module, no lookup there). Long texts (bulk
// writes with their documents in them) are not kept, as in the engine's
// own cache.
const KEPT_STATEMENTS = 64;
const KEPT_TEXT = 1024;

// Finalizes the statements their owners forgot (the module frees them
// anyway when their database closes).
const finalizer =
  typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry(({ ref, st }) => {
        const db = ref.deref(); // (gone: the closer freed its statements with it)
        if (db && db._h !== 0 && !db._core.kfBroken) {
          try {
            db._core.kfFinalize(db._h, st);
          } catch {
            // the module is given up; nothing to free
          }
        }
      })
    : null;

// Closes the databases their owners forgot, as close() would (every write
// flushed, the lock let go), so that their memory in the module, which all
// databases of this process share, is used again: a Durable Object evicted
// without a word leaves its database behind, and the next instance opens
// another.
const closer =
  typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry(({ core, h, hostId, host }) => {
        try {
          // No image written: the file may have been opened again since
          // (a Durable Object's next instance), and an image from this
          // one would replace what that one wrote.
          if (!core.kfBroken) core.kfClose(h, 0);
        } catch {
          // the module is given up: nothing to free
        }
        try {
          core.kfRemoveHost(hostId);
          host.release?.();
        } catch {}
      })
    : null;

// A prepared statement (Kitfox.prepare): parsed and bound once, run with new
// parameters. Bound again by itself when its collection changes.
export class Statement {
  constructor(db, st, text) {
    this._db = db;
    this._st = st;
    this.text = text;
    this._token = {};
    // A weak reference: a strong one held by the registry would keep a
    // forgotten database (whose cache holds its statements) forever.
    finalizer?.register(this, { ref: new WeakRef(db), st }, this._token);
  }

  _handle() {
    if (this._st === 0) throw kitfoxError('invalid', 'the statement was finalized');
    return this._st;
  }

  // Runs it; returns its rows as plain objects.
  query(params) {
    this._db._runPrepared(this._handle(), params, 0);
    return this._db._rows();
  }

  // Runs it; returns each row as JSON text.
  queryJSON(params) {
    const n = this._db._runPrepared(this._handle(), params, FLAG_ROWS_JSON);
    if (n === 0) return [];
    return new TextDecoder().decode(this._db._output()).split('\n');
  }

  // Frees it now (else when it is garbage collected or its database closes).
  finalize() {
    if (this._st === 0) return;
    finalizer?.unregister(this._token);
    const db = this._db;
    if (db._h !== 0 && !db._core.kfBroken) db._call((c) => c.kfFinalize(db._h, this._st));
    this._st = 0;
  }
}

// Bytes of vectors and graph a background slice reads (see _warmLater).
const WARM_SLICE = 2 << 20;
// The first slice waits this long after open: the queries a page makes
// right after it opens (a refresh) come first.
const WARM_DELAY_MS = 50;

export class Kitfox {
  // Use Kitfox.open().
  constructor(core, handle, host, hostId, info) {
    this._core = core;
    this._h = handle;
    this._host = host;
    this._hostId = hostId;
    this._name = info.name;
    this._memory = info.memory;
    this._period = info.period;
    this._timer = null;
    this._warmer = null;
    this._kept = new Map(); // query(), near(): prepared statements by their text
    closer?.register(this, { core, h: handle, hostId, host }, this);
    if (info.warm) this._warmLater(WARM_DELAY_MS);
  }

  // Opening reads the documents but leaves vector tables and HNSW graphs to
  // be read block by block when first used; while the host is idle, this
  // reads the rest a slice at a time (each slice a few milliseconds), so that
  // a query never waits long behind it.
  _warmLater(delay = 0) {
    const later = delay === 0 && globalThis.setImmediate ? globalThis.setImmediate : (f) => setTimeout(f, delay);
    const step = () => {
      this._warmer = null;
      if (this._h === 0 || this._core.kfBroken) return;
      let left;
      try {
        left = this._core.kfWarm(this._h, Math.max(WARM_SLICE, this._host.readChunk ?? 0));
      } catch (e) {
        trapped(this._core, e); // the next call says so
        return;
      }
      if (left > 0) this._warmLater();
    };
    this._warmer = later(step);
    this._warmer?.unref?.();
  }

  // Opens (or creates) a database: a file path in Node, ':memory:', or the
  // bytes of a database file (a Uint8Array, opened in memory; see export()).
  // options.host: a host object (js/hosts/README.md) that keeps the file
  // named `target` in the application's own storage.
  static async open(target = ':memory:', options = {}) {
    if (options === null || typeof options !== 'object') throw kitfoxError('invalid', 'open options must be an object');
    // `create: 0`, 'false' or null would create the file as true does.
    for (const flag of ['create', 'recover'])
      if (options[flag] !== undefined && typeof options[flag] !== 'boolean')
        throw kitfoxError('invalid', `the ${flag} option must be true or false, got ${typeof options[flag] === 'string' ? JSON.stringify(options[flag]) : String(options[flag])}`);
    // The WASM module loads while the host opens its file (OPFS: lock and
    // handles), not before.
    const loadingCore = loadCore(options.wasm);
    loadingCore.catch(() => {}); // awaited below; a failed host open comes first
    const sync = syncOption(options.sync);
    let host;
    let name;
    let memory = false;
    if (options.host !== undefined && options.host !== null) {
      if (typeof target !== 'string' || target === '' || target === ':memory:')
        throw kitfoxError('invalid', `with a host, open takes the database file's name, got ${String(target)}`);
      host = checkHost(options.host);
      name = target;
    } else if (target === ':memory:') {
      host = new MemoryHost();
      name = MEMORY_NAME;
      memory = true;
    } else if (target instanceof Uint8Array || target instanceof ArrayBuffer) {
      host = new MemoryHost();
      name = MEMORY_NAME;
      memory = true;
      if (target.byteLength) host.addFile(name, target instanceof ArrayBuffer ? new Uint8Array(target) : target);
    } else if (typeof target === 'string' && target !== '') {
      ({ host, name } = await currentPlatform().openFileHost(target, options));
    } else {
      throw kitfoxError('invalid', `open takes a file name, ':memory:' or a Uint8Array, got ${String(target)}`);
    }
    let core;
    try {
      core = await loadingCore;
    } catch (e) {
      host.release?.();
      throw e;
    }
    const hostId = core.kfAddHost(host);
    let h;
    try {
      h = core.kfOpen(hostId, host.atomicReplace, name, sync, options.create !== false, options.recover === true, host.readChunk ?? 0);
    } catch (e) {
      core.kfRemoveHost(hostId);
      host.release?.();
      throw trapped(core, e);
    }
    if (h < 0) {
      const err = core.kfLastError();
      core.kfRemoveHost(hostId);
      host.release?.();
      throw err;
    }
    // The single-threaded build flushes in the period mode on the first write
    // after the period; a timer makes that happen without one.
    let period = 0;
    if (!memory && sync !== 'always' && sync !== 'off') period = sync === '' ? 250 : parseInt(sync, 10);
    return new Kitfox(core, h, host, hostId, { name, memory, period, warm: options.warm !== false });
  }

  get closed() {
    return this._h === 0;
  }

  _handle() {
    if (this._h === 0) throw kitfoxError('invalid', 'the database is closed');
    if (this._core.kfBroken) throw this._core.kfBroken;
    return this._h;
  }

  // Calls the module; a trap gives the module up (core.js, trapped).
  _call(f) {
    try {
      return f(this._core);
    } catch (e) {
      throw trapped(this._core, e);
    }
  }

  // Writes `text` (may be null) and then the encoded params into the
  // module's input buffer: returns [text bytes, params bytes, flags].
  _input(text, params, flags) {
    let json = null; // params given as JSON text
    let plen = 0;
    if (typeof params === 'string') {
      json = utf8.encode(params);
      plen = json.length;
      flags |= FLAG_PARAMS_JSON;
    } else if (params !== undefined && params !== null) {
      if (!Array.isArray(params)) throw kitfoxError('invalid', 'params must be an array');
      if (params.length) plen = encodeParamsShared(params); // in the shared encoder
    }
    const core = this._core;
    const maxText = text === null ? 0 : text.length * 3;
    if (maxText + plen > 0x7fffffff) throw kitfoxError('limit', 'a statement and its params must be under 2 GiB');
    const ptr = this._call((c) => c.kfInput(maxText + plen)) >>> 0;
    const heap = core.HEAPU8;
    let written = 0;
    if (text !== null) {
      written = utf8.encodeInto(text, heap.subarray(ptr, ptr + maxText)).written;
      // ASCII text writes one byte a character; other text is checked for a
      // lone surrogate, which TextEncoder would turn into U+FFFD silently.
      if (written !== text.length && !wellFormed(text))
        throw kitfoxError('syntax', 'the statement text holds an unpaired UTF-16 surrogate');
    }
    if (json) heap.set(json, ptr + written);
    else if (plen) copyShared(plen, heap, ptr + written);
    return [written, plen, flags];
  }

  // Runs the statement with its params; the result is left in the output buffer.
  _run(text, params, flags) {
    const h = this._handle();
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const [tlen, plen, f] = this._input(text, params, flags);
    const n = this._call((c) => c.kfQuery(h, tlen, plen, f));
    if (n < 0) throw this._core.kfLastError();
    this._wrote();
    return n;
  }

  // Runs prepared statement `st`.
  _runPrepared(st, params, flags) {
    const h = this._handle();
    const [, plen, f] = this._input(null, params, flags);
    const n = this._call((c) => c.kfRun(h, st, plen, f));
    if (n < 0) throw this._core.kfLastError();
    this._wrote();
    return n;
  }

  // The period sync mode in the single-threaded build flushes on the first
  // write after the period; a timer makes that happen without one.
  _wrote() {
    const core = this._core;
    if (this._period && !this._timer) {
      this._timer = setTimeout(() => {
        this._timer = null;
        // A failure makes the next write fail.
        if (this._h && !core.kfBroken) this._call((c) => c.kfSync(this._h));
      }, this._period);
      this._timer.unref?.();
    }
  }

  // The rows of the last statement, read in place in the output buffer.
  _rows() {
    const core = this._core;
    return decodeRowsAt(core.HEAPU8, core.kfOutputPtr() >>> 0);
  }

  _output() {
    const core = this._core;
    const p = core.kfOutputPtr() >>> 0;
    return core.HEAPU8.subarray(p, p + (core.kfOutputLen() >>> 0));
  }

  // Parses and binds a statement once: returns a Statement whose query(params)
  // runs it again without parsing (see kitfox.d.ts).
  prepare(text) {
    const h = this._handle();
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const [tlen] = this._input(text, null, 0);
    const st = this._call((c) => c.kfPrepare(h, tlen));
    if (st < 0) throw this._core.kfLastError();
    return new Statement(this, st, text);
  }

  // Runs one statement; returns its rows as plain objects.
  query(text, params) {
    if (typeof text === 'string' && text.length <= KEPT_TEXT && typeof params !== 'string') {
      const st = this._keptStatement(text);
      if (st !== null) return st.query(params);
    }
    // Long texts, params as JSON text, and statements that do not prepare:
    // run as text (which then reports the error as always, params first).
    this._run(text, params, 0);
    return this._rows();
  }

  // The kept prepared statement of `text`, prepared now if there is none;
  // null when it does not prepare (query() then runs the text, so its error
  // is the one the text always gave).
  _keptStatement(text) {
    const kept = this._kept;
    let st = kept.get(text); // never handed out, so finalized only when it leaves the map
    if (st) {
      kept.delete(text); // to the back: most recently used
      kept.set(text, st);
      return st;
    }
    try {
      st = this.prepare(text);
    } catch (e) {
      if (e instanceof KitfoxError && e.code !== 'failed') return null;
      throw e;
    }
    if (kept.size >= KEPT_STATEMENTS) {
      const [oldest, old] = kept.entries().next().value;
      kept.delete(oldest);
      old.finalize();
    }
    kept.set(text, st);
    return st;
  }

  // Runs one statement; returns each row as JSON text, exactly as the native
  // build prints it (kitfox::to_json). `params` may be an array or JSON text.
  queryJSON(text, params) {
    const n = this._run(text, params, FLAG_ROWS_JSON);
    if (n === 0) return [];
    const out = this._output();
    return new TextDecoder().decode(out).split('\n');
  }

  // Runs statements (put, insert, set, del, reads) atomically: each sees the
  // ones before it, and they land as one record or not at all. Returns one
  // array of rows per statement.
  batch(statements) {
    const h = this._handle();
    if (!Array.isArray(statements)) throw kitfoxError('invalid', 'batch takes an array of [text, params] pairs');
    const pairs = Array.from(statements, (s, i) => {  // holes too: an entry each
      const [text, params = []] = Array.isArray(s) ? s : [s];
      if (typeof text !== 'string') throw kitfoxError('invalid', `batch entry ${i + 1}: a statement must be a string`);
      if (!Array.isArray(params)) throw kitfoxError('invalid', `batch entry ${i + 1}: params must be an array`);
      return [text, params];
    });
    const enc = encodeBatch(pairs);
    const core = this._core;
    const ptr = this._call((c) => c.kfInput(enc.length)) >>> 0;
    core.HEAPU8.set(enc, ptr);
    const n = this._call((c) => c.kfBatch(h, enc.length));
    if (n < 0) throw core.kfLastError();
    this._wrote();
    return decodeBatch(this._output());
  }

  // Nearest neighbours of `vector` in `collection`.`field`:
  //   get C [select ...] [where ...] near field $k [ef N] [exact] limit K
  near(collection, field, vector, options = {}) {
    const { text: q, params: all } = nearStatement(collection, field, vector, options);
    // One prepared statement per shape of call (one that does not prepare
    // gives its error from prepare).
    return (this._keptStatement(q) ?? this.prepare(q)).query(all);
  }

  // Writes a new image of the file and empties its write log.
  checkpoint() {
    const h = this._handle();
    if (this._call((c) => c.kfCheckpoint(h)) < 0) throw this._core.kfLastError();
  }

  // Flushes every write so far to durable storage.
  sync() {
    const h = this._handle();
    if (this._call((c) => c.kfSync(h)) < 0) throw this._core.kfLastError();
  }

  // The database file's bytes (after a checkpoint): open them again with
  // Kitfox.open(bytes), or write them to a file the CLI opens.
  export() {
    const h = this._handle();
    if (this._call((c) => c.kfExportFile(h)) < 0) throw this._core.kfLastError();
    return this._output().slice();
  }

  stats() {
    const h = this._handle();
    const s = JSON.parse(this._call((c) => c.kfStats(h)));
    s.wasmMemoryBytes = this._core.HEAPU8.buffer.byteLength;
    return s;
  }

  // Closes the database (checkpointing when worthwhile) and frees its memory.
  // Closing twice is allowed. Over OPFS it returns a Promise that settles
  // once the file is let go (handles closed, Web Lock dropped), so that
  // another open of the name succeeds at once; elsewhere it returns nothing.
  close() {
    if (this._h === 0) return this._host.released;
    closer?.unregister(this);
    const core = this._core;
    // A given-up module is not called again (its state is unknown): the
    // file is let go as it is, with every acknowledged write in it.
    let err = null;
    if (!core.kfBroken) {
      try {
        if (core.kfClose(this._h, 1) < 0) err = core.kfLastError();
      } catch (e) {
        err = trapped(core, e);
      }
    }
    this._h = 0;
    this._kept.clear(); // the module freed them with the database
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    core.kfRemoveHost(this._hostId);
    this._host.release?.();
    if (err) throw err;
    return this._host.released;
  }

  // The size of the WASM heap (all databases of this process share it).
  static async wasmMemoryBytes() {
    const core = await loadCore();
    return core.HEAPU8.buffer.byteLength;
  }

  // 'node' or 'web': which host layer a database name opens with.
  static get platform() {
    return currentPlatform().platform;
  }
}

export default Kitfox;
