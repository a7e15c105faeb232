// kitfox/worker: kitfox in a browser page's main thread. OPFS's sync access
// handles exist only in dedicated workers, so connect() starts one (a module
// worker running js/worker-main.js), opens the database there over OPFS and
// returns the same methods as Kitfox, as promises:
//
//   import { connect } from 'kitfox/worker';
//   const db = await connect('notes.kfdb');
//   await db.query('put notes {title: $1, embed: $2}', ['hello', new Float32Array(128)]);
//   const rows = await db.near('notes', 'embed', q, { limit: 5 });
//   await db.close();                            // also ends the worker
//
// Errors are KitfoxError with the engine's code and position. Vectors cross
// postMessage as Float32Array (rows' vectors are transferred, not copied).
import { KitfoxError } from './errors.js';
import { compileGiven } from './core.js';
import { compileWasm } from './platform/web.js';

export { KitfoxError };

function toError(e) {
  return new KitfoxError(e.code, e.message, e.position);
}

export class StatementConnection {
  // Use KitfoxConnection.prepare().
  constructor(conn, id, text) {
    this._conn = conn;
    this._id = id;
    this.text = text;
  }

  query(params) {
    return this._conn._call('run', [this._id, params]);
  }

  queryJSON(params) {
    return this._conn._call('runJSON', [this._id, params]);
  }

  finalize() {
    return this._conn._call('finalize', [this._id]);
  }
}

export class KitfoxConnection {
  // Use connect().
  constructor(worker) {
    this._worker = worker;
    this._next = 1;
    this._pending = new Map(); // id -> { resolve, reject, onProgress }
    this._dead = null; // the error every call gets once the worker is gone
    this.timings = null; // { totalMs, startMs, loadMs, openMs, readsOnDemand } of connect() (js/worker-main.js)
    worker.onmessage = (ev) => {
      const m = ev.data;
      const p = this._pending.get(m.id);
      if (!p) return;
      if ('progress' in m) {
        if (p.onProgress) p.onProgress(m.progress);
        return;
      }
      this._pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(toError(m.error));
    };
    const die = (what) => {
      if (!this._dead) this._dead = new KitfoxError('io', `io error: the kitfox worker stopped: ${what}`, -1);
      for (const p of this._pending.values()) p.reject(this._dead);
      this._pending.clear();
    };
    worker.onerror = (ev) => {
      ev.preventDefault?.();
      die(ev.message || 'an error in the worker');
    };
    worker.onmessageerror = () => die('a message could not be read');
    this._die = die;
  }

  _call(op, args, transfer = [], onProgress = null) {
    if (this._dead) return Promise.reject(this._dead);
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, onProgress });
      try {
        this._worker.postMessage({ id, op, args }, transfer);
      } catch (e) {
        this._pending.delete(id);
        reject(new KitfoxError('invalid', `invalid error: cannot send to the worker: ${e && e.message ? e.message : e}`, -1));
      }
    });
  }

  get closed() {
    return this._dead !== null;
  }

  // A statement prepared in the worker; its query() sends only the params.
  async prepare(text) {
    const id = await this._call('prepare', [text]);
    return new StatementConnection(this, id, text);
  }

  query(text, params) {
    return this._call('query', [text, params]);
  }

  queryJSON(text, params) {
    return this._call('queryJSON', [text, params]);
  }

  batch(statements) {
    return this._call('batch', [statements]);
  }

  near(collection, field, vector, options = {}) {
    return this._call('near', [collection, field, vector, options]);
  }

  checkpoint() {
    return this._call('checkpoint', []);
  }

  sync() {
    return this._call('sync', []);
  }

  export() {
    return this._call('export', []);
  }

  stats() {
    return this._call('stats', []);
  }

  // Runs `name` exported by the worker module given to connect() as
  // options.module: `name(db, args, progress)` in the worker, next to the
  // database (bulk loads without a round trip per batch). `progress(value)`
  // there calls `onProgress(value)` here.
  call(name, args, { onProgress } = {}) {
    return this._call('call', [name, args], [], onProgress || null);
  }

  // Closes the database (its lock is dropped when this settles) and ends the
  // worker. Closing twice is allowed.
  async close() {
    if (this._dead) return;
    try {
      await this._call('close', []);
    } finally {
      this._worker.terminate();
      this._die('closed');
      this._dead = new KitfoxError('invalid', 'invalid error: the database is closed', -1);
    }
  }
}

// Starts a worker and opens `name` there: an OPFS file name ('notes.kfdb',
// 'app/notes.kfdb'), ':memory:', or a database file's bytes. Options: those
// of Kitfox.open (sync, create, wasm), `module`: the URL of an ES module the
// worker imports, whose functions call() runs, and `workerUrl`: the worker
// script (kitfox/worker-main bundled on its own) for a bundler that does
// not bundle workers (esbuild).
export async function connect(name, options = {}) {
  if (typeof Worker === 'undefined') throw new KitfoxError('invalid', 'invalid error: connect() needs Web Workers (a browser page)', -1);
  const t0 = performance.now();
  const { wasm, workerUrl, ...opts } = options;
  // `new Worker(new URL('./worker-main.js', import.meta.url), { type:
  // 'module' })`, literally, is what Vite and webpack recognise and bundle
  // as a worker (Vite refuses options it cannot read statically).
  const worker =
    workerUrl !== undefined
      ? new Worker(workerUrl, { type: 'module' })
      : new Worker(new URL('./worker-main.js', import.meta.url), { type: 'module' });
  // The page compiles the WASM module (once) while the worker starts and
  // hands it over; null makes the worker compile it itself.
  compileWasm(wasm !== undefined && wasm !== null ? compileGiven(wasm) : null).then(
    (module) => {
      try {
        worker.postMessage({ op: 'module', module });
      } catch {
        worker.postMessage({ op: 'module', module: null }); // a module that cannot cross
      }
    },
    () => worker.postMessage({ op: 'module', module: null }),
  );
  const conn = new KitfoxConnection(worker);
  if (opts.module !== undefined) opts.module = new URL(String(opts.module), globalThis.location?.href).href;
  try {
    const t = await conn._call('open', [name, opts]);
    conn.timings = { totalMs: performance.now() - t0, ...t };
  } catch (e) {
    worker.terminate();
    conn._die('open failed');
    throw e;
  }
  return conn;
}

export default connect;
