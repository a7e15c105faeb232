// kitfox/worker: kitfox in a browser page's main thread. OPFS's sync access
// handles exist only in dedicated workers, so the database runs in one (a
// module worker running js/worker-main.js), and connect() returns the same
// methods as Kitfox, as promises:
//
//   import { connect } from 'kitfox/worker';
//   const db = await connect('notes.kfdb');
//   const off = db.on('change', ({ collections }) => redraw(collections));
//   await db.query('put notes {title: $1, embed: $2}', ['hello', new Float32Array(128)]);
//   const rows = await db.near('notes', 'embed', q, { limit: 5 });
//   await db.close();
//
// Shared by default: the tabs (and workers) of an origin that connect to the
// same name elect a leader with Web Locks (js/tabs.js has the names). The
// leader's page starts the worker that holds the file; every other
// connection sends its calls to that worker over BroadcastChannels and gets
// the same answers. When the leader goes away (its tab closed, crashed or
// refreshed, or close() called), the connection that waited longest takes
// over: it starts a worker, which reopens the file. A call in flight then
// is sent again when it is a read, and fails with KitfoxError 'failed' when
// it is a write that may have landed (it is never sent twice). Transactions
// belong to the connection that began them: the leader runs no one else's
// call while one is open, and a transaction whose leader went away fails.
// Prepared statements are prepared again by themselves on a new leader.
// `connect(name, { exclusive: true })` keeps the database to this
// connection alone: another one gets KitfoxError 'locked'.
//
// Errors are KitfoxError with the engine's code and position. Vectors cross
// as Float32Array (raw bytes, structured clone; the leader's own worker
// transfers the rows' vectors to its page).
import { encodeBatch, encodeParamsShared } from './codec.js';
import { KitfoxError } from './errors.js';
import { compileGiven } from './core.js';
import { compileWasm } from './platform/web.js';
import { classify, retrySafe } from './statement-kind.js';
import * as tabs from './tabs.js';

export { KitfoxError };

function toError(e) {
  return new KitfoxError(e.code, e.message, e.position);
}

const invalid = (detail) => new KitfoxError('invalid', `invalid error: ${detail}`, -1);

// Parameters are checked here as Kitfox checks them, by the same encoder
// (structured clone would turn a class instance into a plain object, and
// refuse a function without naming the parameter); what is no array is
// left for the worker to refuse. A rejected Promise when one cannot be stored.
function checked(params, send, encode = encodeParamsShared) {
  try {
    if (Array.isArray(params)) encode(params);
  } catch (e) {
    return Promise.reject(e);
  }
  return send();
}
const failed = (detail) => new KitfoxError('failed', `failed error: ${detail}`, -1);

const MAYBE_LANDED =
  'the tab serving the database went away while this call was under way: it may or may not have landed (check, then retry)';
const TXN_LOST =
  'the transaction was lost: the tab serving the database went away before it was committed, and none of its writes landed (begin it again)';

export class StatementConnection {
  // Use KitfoxConnection.prepare().
  constructor(conn, id, text) {
    this._conn = conn;
    this._id = id;
    this._kind = classify(text).kind;
    this._finalized = false;
    this.text = text;
  }

  _run(op, params) {
    if (this._finalized) return Promise.reject(invalid('the statement was finalized'));
    // The text goes along: a new leader (after a takeover) prepares it again.
    return this._conn._call(op, [this._id, params, this.text], { kind: this._kind, statement: true });
  }

  query(params) {
    return checked(params, () => this._run('run', params));
  }

  queryJSON(params) {
    return checked(params, () => this._run('runJSON', params));
  }

  finalize() {
    if (this._finalized) return Promise.resolve();
    this._finalized = true;
    return this._conn._call('finalize', [this._id], { kind: 'read' });
  }
}

// The worker of a connection that leads (or is exclusive). `new Worker(new
// URL('./worker-main.js', import.meta.url), { type: 'module' })`, literally,
// is what Vite and webpack recognise and bundle as a worker (Vite refuses
// options it cannot read statically).
function startWorker(wasm, workerUrl) {
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
  return worker;
}

// Holds the Web Lock `name` from when this resolves (with its release
// function) until that function is called.
function holdLock(name, options = {}) {
  return new Promise((resolve, reject) => {
    navigator.locks.request(name, options, () => new Promise((release) => resolve(release))).catch(reject);
  });
}

function reportLater(e) {
  setTimeout(() => {
    throw e;
  });
}

export class KitfoxConnection {
  // Use connect().
  constructor(name, options, shared) {
    this._name = name;
    this._options = options; // those of Kitfox.open, plus module, wasm, workerUrl
    this._shared = shared;
    this._client = tabs.uuid();
    this._next = 1; // call ids
    this._nextAsk = -1; // ids of the page's own messages to its worker (open, close, resign)
    this._nextStatement = 1;
    this._calls = new Map(); // id -> call, from the call until its answer
    this._waiting = []; // calls not sent yet: no leader to send them to
    this._asks = new Map();
    this._leader = null; // { id, local, send(msg, transfer), resigning }
    this._gone = new Set(); // leaders known to be gone
    this._channels = new Map(); // leader id -> BroadcastChannel of its requests
    this._leading = false; // this connection holds the leader lock
    this._worker = null; // the worker of this connection (leader or exclusive)
    this._txn = null; // the transaction this connection has open: { leader, lost, void }
    this._listeners = { change: new Set(), leader: new Set() };
    this._dead = null; // the error every call gets once closed or broken
    this._closing = null;
    this._moduleUrl = options.module !== undefined ? new URL(String(options.module), globalThis.location?.href).href : undefined;
    this.timings = null; // { totalMs, startMs, loadMs, openMs, readsOnDemand } of connect() (js/worker-main.js)
  }

  // ---- calls -----------------------------------------------------------------

  // `kind` (js/statement-kind.js) says whether the call may be sent again
  // after its leader went away without answering.
  _call(op, args, { transfer = [], onProgress = null, kind = 'unknown', statement = false } = {}) {
    if (this._dead) return Promise.reject(this._dead);
    if (this._closing) return Promise.reject(invalid('the database is closed'));
    const id = this._next++;
    let txn = this._txn;
    if (kind === 'begin' && (op === 'query' || op === 'queryJSON' || statement)) {
      txn = { leader: null, lost: false, void: false };
      this._txn = txn;
    } else if (txn && (kind === 'commit' || kind === 'rollback')) {
      this._txn = null; // later calls are outside it
    }
    return new Promise((resolve, reject) => {
      const call = { id, op, args, transfer, onProgress, resolve, reject, kind, txn, leader: null };
      this._calls.set(id, call);
      this._waiting.push(call);
      this._dispatch();
    });
  }

  _settle(call, ok, value) {
    this._calls.delete(call.id);
    if (ok) call.resolve(value);
    else call.reject(value);
  }

  // Sends the waiting calls, in order, to the leader when there is one.
  _dispatch() {
    const leader = this._leader;
    if (!leader || leader.resigning) return;
    while (this._waiting.length && this._leader === leader) {
      const call = this._waiting.shift();
      const t = call.txn;
      if (t && !t.void) {
        if (call.kind === 'begin' && t.leader === null) t.leader = leader.id;
        else if (t.lost || t.leader !== leader.id) {
          t.lost = true;
          this._lost(call);
          continue;
        }
      }
      call.leader = leader.id;
      try {
        const args = call.op === 'call' ? [...call.args, this._moduleUrl] : call.args;
        leader.send({ id: call.id, op: call.op, args }, call.transfer);
      } catch (e) {
        call.leader = null;
        this._settle(call, false, invalid(`cannot send to the worker: ${e && e.message ? e.message : e}`));
      }
    }
  }

  // A call of a transaction that was lost: rollback has nothing left to do.
  _lost(call) {
    if (call.kind === 'rollback') this._settle(call, true, []);
    else this._settle(call, false, failed(TXN_LOST));
  }

  // An answer from leader `from`.
  _answer(m, from) {
    const call = this._calls.get(m.id);
    if (!call || call.leader !== from) return;
    if ('progress' in m) {
      if (call.onProgress) call.onProgress(m.progress);
      return;
    }
    if (m.moved) {
      // Not run: that leader is stepping down. The next one gets it. A
      // begin it did not run began nothing there: its transaction is not
      // lost, and begins on the next leader.
      call.leader = null;
      const t = call.txn;
      if (call.kind === 'begin' && t && t.leader === from) {
        t.leader = null;
        t.lost = false;
      }
      this._requeue(call);
      return;
    }
    if (!m.ok && call.kind === 'begin' && call.txn) call.txn.void = true;
    this._settle(call, m.ok, m.ok ? m.value : toError(m.error));
  }

  _requeue(call) {
    this._waiting.push(call);
    this._waiting.sort((a, b) => a.id - b.id);
    this._dispatch();
  }

  // Leader `id` is gone (its worker ended): what it had not answered is sent
  // again when that cannot apply anything twice, else fails.
  _leaderGone(id) {
    if (this._gone.has(id)) return;
    this._gone.add(id);
    const channel = this._channels.get(id);
    if (channel) {
      channel.close();
      this._channels.delete(id);
    }
    if (this._leader && this._leader.id === id) this._leader = null;
    if (this._txn && !this._txn.void && this._txn.leader === id) this._txn.lost = true;
    for (const call of [...this._calls.values()]) {
      if (call.leader !== id) continue;
      call.leader = null;
      const t = call.txn && !call.txn.void && call.txn.leader === id ? call.txn : null;
      if (t) t.lost = true;
      if (call.kind === 'commit') this._settle(call, false, failed(MAYBE_LANDED));
      else if (t) this._lost(call);
      else if (retrySafe(call.kind) || call.kind === 'begin') this._requeue(call);
      else this._settle(call, false, failed(MAYBE_LANDED));
    }
    this._dispatch();
  }

  // Every call, now and later, fails with `error`.
  _break(error) {
    if (!this._dead) this._dead = error;
    this._waiting = [];
    for (const call of [...this._calls.values()]) this._settle(call, false, this._dead);
    for (const a of this._asks.values()) a.reject(this._dead);
    this._asks.clear();
    this._teardown();
  }

  // ---- the connection's own worker ---------------------------------------------

  _startWorker() {
    const worker = startWorker(this._options.wasm, this._options.workerUrl);
    this._worker = worker;
    worker.onmessage = (ev) => this._fromWorker(worker, ev.data);
    worker.onerror = (ev) => {
      ev.preventDefault?.();
      this._workerDied(worker, ev.message || 'an error in the worker');
    };
    worker.onmessageerror = () => this._workerDied(worker, 'a message could not be read');
    return worker;
  }

  _fromWorker(worker, m) {
    if (worker !== this._worker || !m) return;
    if (m.event === 'change') return this._emit('change', { collections: m.collections });
    if (m.event === 'drained') return this._drained?.();
    if (m.event === 'broken') return this._workerDied(worker, 'its WebAssembly module failed (the database is opened again in a new one)');
    if (m.id < 0) {
      const a = this._asks.get(m.id);
      if (!a) return;
      this._asks.delete(m.id);
      if (m.ok) a.resolve(m.value);
      else a.reject(toError(m.error));
      return;
    }
    if (this._leader && this._leader.local) this._answer(m, this._leader.id);
  }

  // A message of the page itself to its worker (open, close, resign), ahead
  // of the calls.
  _ask(op, args = []) {
    const worker = this._worker;
    const id = this._nextAsk--;
    return new Promise((resolve, reject) => {
      this._asks.set(id, { resolve, reject });
      worker.postMessage({ id, op, args });
    });
  }

  _workerDied(worker, what) {
    if (worker !== this._worker) return;
    const error = new KitfoxError('io', `io error: the kitfox worker stopped: ${what}`, -1);
    for (const a of this._asks.values()) a.reject(error);
    this._asks.clear();
    if (!this._shared) {
      // As before sharing: every pending and later call fails.
      this._worker = null;
      worker.terminate();
      this._break(error);
      return;
    }
    // Shared: like a leader's tab going away. Another connection (or this
    // one again) takes over.
    this._worker = null;
    worker.terminate();
    const id = this._leader && this._leader.local ? this._leader.id : null;
    if (id !== null) this._leaderGone(id);
    this._stepDown?.();
  }

  // ---- exclusive ----------------------------------------------------------------

  async _openExclusive(name, t0) {
    const worker = this._startWorker();
    const { wasm, workerUrl, ...opts } = this._options;
    if (this._moduleUrl !== undefined) opts.module = this._moduleUrl;
    try {
      const t = await this._ask('open', [name, opts]);
      this.timings = { totalMs: performance.now() - t0, ...t };
    } catch (e) {
      worker.terminate();
      this._worker = null;
      this._dead = invalid('the database is not open');
      throw e;
    }
    this._leader = { id: 'local', local: true, resigning: false, send: (m, transfer) => worker.postMessage(m, transfer) };
  }

  // ---- shared ---------------------------------------------------------------------

  async _join(t0) {
    const name = this._name;
    this._abort = new AbortController();
    // Held for this connection's life: the leader asks for it to learn that
    // this connection is gone (its transaction and statements then go).
    this._releaseClient = await holdLock(tabs.clientLock(name, this._client));
    this._control = new BroadcastChannel(tabs.controlChannel(name));
    this._control.onmessage = (ev) => this._onControl(ev.data);
    this._replies = new BroadcastChannel(tabs.replyChannel(name, this._client));
    this._replies.onmessage = (ev) => {
      const m = ev.data;
      if (m && typeof m === 'object') this._answer(m, m.leader);
    };
    this._requestLeadership();
    this._control.postMessage({ type: 'who' });
    // Answered by whichever leader this connection finds first: another
    // tab's, or its own once it leads.
    const hello = await this._call('hello', [], { kind: 'read' });
    if (!this.timings) this.timings = { totalMs: performance.now() - t0, startMs: 0, loadMs: 0, openMs: 0, readsOnDemand: hello.readsOnDemand };
  }

  // Waits for the leader lock (until this connection closes); leads while it
  // holds it.
  _requestLeadership() {
    if (this._dead || this._abort.signal.aborted) return;
    navigator.locks
      .request(tabs.leaderLock(this._name), { signal: this._abort.signal }, () => this._lead())
      .then(
        () => this._requestLeadership(), // stepped down (its worker died): wait again
        () => {}, // aborted: closed
      );
  }

  async _lead() {
    // Leads while closing too: the calls made before close() need a leader.
    if (this._dead) return;
    this._leading = true;
    // The leader followed so far has at least lost its page: send it nothing
    // more (what it has will be answered, or given up when its worker ends).
    const followed = this._leader !== null || this._gone.size > 0;
    if (this._leader && !this._leader.local) this._leader = null;
    const id = tabs.uuid();
    const held = new Promise((resolve) => {
      this._stepDown = () => {
        this._stepDown = null;
        this._leading = false;
        resolve();
      };
    });
    const worker = this._startWorker();
    const { wasm, workerUrl, ...opts } = this._options;
    if (this._moduleUrl !== undefined) opts.module = this._moduleUrl;
    opts.shared = { name: this._name, leader: id, client: this._client, takeover: followed };
    const t0 = performance.now();
    try {
      const t = await this._ask('open', [this._name, opts]);
      if (!this.timings) this.timings = { totalMs: performance.now() - this._t0, ...t };
      // For bench/browser/tabs.js: how long this connection's takeover took.
      if (followed) this._takeover = { ms: performance.now() - t0, ...t };
    } catch (e) {
      worker.terminate();
      if (this._worker === worker) this._worker = null;
      this._stepDown?.();
      if (this._dead) return held;
      // On connect, connect() rejects with the error; after a takeover the
      // connection cannot go on without the file.
      const code = e && typeof e.code === 'string' ? e.code : 'failed';
      const message = e && e.message ? e.message : String(e);
      this._break(followed ? new KitfoxError(code, `${message} (taking over '${this._name}' from a tab that went away)`, -1) : e);
      return held;
    }
    if (this._worker !== worker) return held; // the worker died meanwhile
    if (this._dead) {
      worker.terminate(); // closed meanwhile
      this._worker = null;
      this._stepDown?.();
      return held;
    }
    this._leader = { id, local: true, resigning: false, send: (m, transfer) => worker.postMessage(m, transfer) };
    this._emit('leader', { isLeader: true });
    this._dispatch();
    return held;
  }

  _onControl(m) {
    if (!m || typeof m !== 'object' || this._dead) return;
    switch (m.type) {
      case 'leader':
        this._follow(m.leader);
        break;
      case 'resigning':
        // Its database is closed: a transaction begun there is gone.
        if (this._txn && this._txn.leader === m.leader) this._txn.lost = true;
        if (this._leader && this._leader.id === m.leader && !this._leader.local) this._leader.resigning = true; // later calls wait for the next leader
        // After every call this connection sent it, in order: it answers
        // 'moved' to those it did not run, then may end.
        this._channels.get(m.leader)?.postMessage({ type: 'drained', client: this._client });
        break;
      case 'change':
        this._emit('change', { collections: m.collections });
        break;
      default:
        break;
    }
  }

  // Another tab's leader announced itself.
  _follow(id) {
    if (typeof id !== 'string' || this._leading || this._gone.has(id) || (this._leader && this._leader.id === id)) return;
    let channel = this._channels.get(id);
    if (!channel) {
      channel = new BroadcastChannel(tabs.requestChannel(this._name, id));
      this._channels.set(id, channel);
    }
    const client = this._client;
    this._leader = { id, local: false, resigning: false, send: (m) => channel.postMessage({ ...m, client }) };
    // Granted once that leader's worker is gone.
    navigator.locks
      .request(tabs.epochLock(this._name, id), { mode: 'shared', signal: this._abort.signal }, () => this._leaderGone(id))
      .catch(() => {});
    this._emit('leader', { isLeader: false });
    this._dispatch();
  }

  _teardown() {
    this._abort?.abort();
    this._control?.close();
    this._replies?.close();
    for (const c of this._channels.values()) c.close();
    this._channels.clear();
    this._releaseClient?.();
    this._releaseClient = null;
    if (this._worker) this._worker.terminate();
    this._worker = null;
    this._stepDown?.();
  }

  // ---- events ---------------------------------------------------------------------

  // 'change': { collections } after a write lands (from any tab, this one
  // too); 'leader': { isLeader } when the connection starts following a new
  // leader or starts leading. Returns a function that unsubscribes.
  on(event, listener) {
    const set = this._listeners[event];
    if (!set) throw invalid(`connections have no event '${event}' (they have 'change' and 'leader')`);
    if (typeof listener !== 'function') throw invalid('on() takes a function');
    const entry = { listener };
    set.add(entry);
    return () => set.delete(entry);
  }

  _emit(event, payload) {
    for (const { listener } of [...this._listeners[event]]) {
      try {
        listener(payload);
      } catch (e) {
        reportLater(e);
      }
    }
  }

  // ---- the API ----------------------------------------------------------------------

  // From the call to close() on: its calls are refused from then.
  get closed() {
    return this._dead !== null || this._closing !== null;
  }

  // True while this connection's own worker holds the file (always, for an
  // exclusive connection).
  get isLeader() {
    return !!(this._leader && this._leader.local) && !this._dead;
  }

  // A statement prepared in the worker; its query() sends only the params
  // (and its text, for a leader that has not seen it).
  async prepare(text) {
    const id = this._nextStatement++;
    await this._call('prepare', [id, text], { kind: 'read' });
    return new StatementConnection(this, id, text);
  }

  query(text, params) {
    return checked(params, () => this._call('query', [text, params], { kind: classify(text).kind }));
  }

  queryJSON(text, params) {
    return checked(params, () => this._call('queryJSON', [text, params], { kind: classify(text).kind }));
  }

  batch(statements) {
    const read = Array.isArray(statements) && statements.every((s) => classify(Array.isArray(s) ? s[0] : s).kind === 'read');
    // As Kitfox.batch encodes them: the [text, params] pairs as one list.
    const pairs = Array.isArray(statements) && Array.from(statements, (s) => (Array.isArray(s) ? [s[0], s[1] ?? []] : [s, []]));
    const whole = pairs && pairs.every(([text, params]) => typeof text === 'string' && Array.isArray(params));
    return checked(whole ? pairs : null, () => this._call('batch', [statements], { kind: read ? 'read' : 'write' }), encodeBatch);
  }

  near(collection, field, vector, options = {}) {
    return checked(options?.params, () => this._call('near', [collection, field, vector, options], { kind: 'read' }));
  }

  checkpoint() {
    return this._call('checkpoint', [], { kind: 'maintenance' });
  }

  sync() {
    return this._call('sync', [], { kind: 'maintenance' });
  }

  export() {
    return this._call('export', [], { kind: 'maintenance' });
  }

  stats() {
    return this._call('stats', [], { kind: 'read' });
  }

  // Runs `name` exported by the worker module given to connect() as
  // options.module: `name(db, args, progress)` in the worker that holds the
  // database (the leader's: it imports this connection's module), next to
  // the database (bulk loads without a round trip per batch).
  // `progress(value)` there calls `onProgress(value)` here. Never sent twice.
  call(name, args, { onProgress } = {}) {
    return this._call('call', [name, args], { onProgress: onProgress || null, kind: 'unknown' });
  }

  // Closes the connection once the calls made before it are answered.
  // Exclusive, or the last connection: closes the database (its lock is
  // dropped when this settles) and ends the worker. A leader with
  // followers hands the database over: it closes the file, and the
  // connection that waited longest reopens it. Closing twice is allowed.
  close() {
    if (this._dead && !this._closing) return Promise.resolve();
    if (!this._closing) this._closing = this._close();
    return this._closing;
  }

  async _close() {
    const pending = [...this._calls.values()].map((c) => new Promise((r) => {
      const { resolve, reject } = c;
      c.resolve = (v) => (resolve(v), r());
      c.reject = (e) => (reject(e), r());
    }));
    await Promise.all(pending);
    const closedError = invalid('the database is closed');
    try {
      if (!this._shared) {
        if (this._worker && !this._dead) await this._ask('close');
      } else if (this._leader && this._leader.local && this._worker) {
        const worker = this._worker;
        const drained = new Promise((resolve) => {
          this._drained = resolve;
          setTimeout(resolve, tabs.DRAIN_MS + 500);
        });
        await this._ask('resign'); // the file is closed: the next leader may open it
        this._abort.abort();
        this._stepDown?.();
        await drained; // followers know; what they sent meanwhile was answered 'moved'
        worker.terminate();
      } else if (this._leader && !this._leader.local) {
        this._leader.send({ op: 'bye' });
      }
    } finally {
      if (!this._dead) this._dead = closedError;
      this._break(closedError);
      this._dead = closedError;
    }
  }
}

// Opens `name` in a dedicated worker: an OPFS file name ('notes.kfdb',
// 'app/notes.kfdb'), ':memory:', or a database file's bytes. Options: those
// of Kitfox.open (sync, create, lockTimeout, readsOnDemand, warm, wasm),
// `exclusive` (true: not shared with other tabs; another connection gets
// 'locked'), `module`: the URL of an ES module the worker imports, whose
// functions call() runs, and `workerUrl`: the worker script
// (kitfox/worker-main bundled on its own) for a bundler that does not bundle
// workers (esbuild). An OPFS name is shared unless `exclusive`; ':memory:'
// and bytes are always this connection's own, as is everything where Web
// Locks or BroadcastChannel are missing.
export async function connect(name, options = {}) {
  if (typeof Worker === 'undefined') throw new KitfoxError('invalid', 'invalid error: connect() needs Web Workers (a browser page)', -1);
  if (options === null || typeof options !== 'object') throw invalid('connect options must be an object');
  const t0 = performance.now();
  const { exclusive = false, ...opts } = options;
  if (typeof exclusive !== 'boolean') throw invalid(`exclusive must be true or false, got ${String(exclusive)}`);
  const shared = !exclusive && typeof name === 'string' && name !== '' && name !== ':memory:' && tabs.canShare();
  const conn = new KitfoxConnection(name, opts, shared);
  conn._t0 = t0;
  if (!shared) {
    await conn._openExclusive(name, t0);
    return conn;
  }
  try {
    await conn._join(t0);
  } catch (e) {
    conn._break(e);
    throw e;
  }
  return conn;
}

export default connect;
