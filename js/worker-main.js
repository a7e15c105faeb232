// The dedicated worker behind kitfox/worker (js/worker.js): runs one database
// over OPFS and answers its page, and, when the database is shared (the
// page's connection leads, js/tabs.js), the other tabs' connections too.
//
//   page -> worker   { id, op, args }      op: open, query, queryJSON, batch,
//                                           near, prepare, run, runJSON,
//                                           finalize, checkpoint, sync,
//                                           export, stats, call, hello,
//                                           close (exclusive), resign (shared)
//   worker -> page   { id, ok: true, value } | { id, ok: false, error }
//                    { id, progress }       (from a `call`, any number of times)
//                    { event: 'change', collections }   (exclusive)
//                    { event: 'drained' }   (after resign)
//                    { event: 'broken' }    (shared: the module failed; the page ends this worker)
//
// Shared, other tabs' connections send the same requests, with their
// `client` id, on the leader's request channel, and get the same answers
// (with `leader`: this worker's id) on their own reply channel, or
// { id, moved: true } for a request it did not run because it is stepping
// down (the next leader gets it). Announcements (leader, resigning, change)
// go on the database's channel.
//
// Errors cross as { code, message, position } and become KitfoxError again.
// Float32Array vectors in rows (each over its own buffer) and exported bytes
// are transferred to the page, not copied; to other tabs they are cloned
// (BroadcastChannel transfers nothing).
import { Kitfox, KitfoxError } from './browser.js';
import { expectCompiledWasm, provideCompiledWasm } from './platform/web.js';
import { classify } from './statement-kind.js';
import * as tabs from './tabs.js';
// The modules browser.js leads to, named here too so that the browser asks
// for them all in its first round of requests instead of one level of the
// import graph at a time (four round trips to the server before the
// Emscripten glue).
import './kitfox.js';
import './core.js';
import '../dist/kitfox-core.web.js';
import './codec.js';
import './errors.js';
import './hosts/memory.js';
import './hosts/opfs.js';
import './platform/web.js';
import './platform/current.js';

let db = null;
let extension = null; // the page's options.module
let extensionUrl = null;
const extensions = new Map(); // other tabs' modules, by URL: Promise of the module
let shared = null; // { name, leader, control, requests, resigning, drain }

// connect() posts the module it compiled while this worker started.
expectCompiledWasm();

// The WASM module starts loading as soon as the worker runs, while the page's
// open message is on its way; open() waits for it.
const started = performance.now();
const loading = Kitfox.wasmMemoryBytes().then(
  () => ({ ms: performance.now() - started }),
  (e) => ({ error: e }),
);

function errorOf(e) {
  if (e instanceof KitfoxError || (e && typeof e.code === 'string'))
    return { code: e.code, message: e.message, position: typeof e.position === 'number' ? e.position : -1 };
  return { code: 'failed', message: `failed error: ${e && e.message ? e.message : String(e)}`, position: -1 };
}

const invalid = (detail) => new KitfoxError('invalid', `invalid error: ${detail}`, -1);

// The buffers of typed arrays in a result, to transfer them.
function transferables(value, out = new Set(), depth = 0) {
  if (value === null || typeof value !== 'object' || depth > 64) return out;
  if (ArrayBuffer.isView(value)) {
    if (value.byteOffset === 0 && value.byteLength === value.buffer.byteLength) out.add(value.buffer);
    return out;
  }
  if (value instanceof Date) return out;
  if (Array.isArray(value)) {
    for (const v of value) transferables(v, out, depth + 1);
  } else {
    for (const k in value) transferables(value[k], out, depth + 1);
  }
  return out;
}

// ---- clients: the page, and other tabs' connections --------------------------

// Each has its own prepared statements (by the ids it chose) and may own the
// open transaction.
const page = { id: 'page', remote: false, statements: new Map(), gone: false, post: (m, transfer) => postMessage(m, transfer) };
const clients = new Map(); // id -> client, other tabs'

function remoteClient(id) {
  let c = clients.get(id);
  if (c) return c;
  const channel = new BroadcastChannel(tabs.replyChannel(shared.name, id));
  c = {
    id,
    remote: true,
    statements: new Map(),
    gone: false,
    channel,
    post(m) {
      if (!c.gone) channel.postMessage({ ...m, leader: shared.leader });
    },
  };
  clients.set(id, c);
  // Granted when that connection is gone (closed, or its tab).
  navigator.locks.request(tabs.clientLock(shared.name, id), () => clientGone(c)).catch(() => {});
  return c;
}

// A connection that is gone: its requests not run yet are dropped, its
// statements finalized, its transaction rolled back.
function clientGone(c) {
  if (c.gone) return;
  for (let i = waiting.length - 1; i >= 0; i--) if (waiting[i].client === c) waiting.splice(i, 1);
  enqueue({ client: c, id: 0, op: 'bye', args: [], priority: true });
  const d = shared?.drain;
  if (d && d.delete(c.id) && d.size === 0) d.done();
}

// ---- changes and transactions -------------------------------------------------

let current = null; // the client whose request runs
let txnOwner = null; // the client whose transaction is open
let txnWrites = null; // the collections it wrote (queued)
const changed = new Set(); // collections written since the last announcement

function landed(c, ok) {
  if (!ok) {
    if (c.kind === 'commit') endTransaction(false); // a failed commit ends it too
    return;
  }
  switch (c.kind) {
    case 'write':
      if (c.collection) (txnWrites ?? changed).add(c.collection);
      break;
    case 'begin':
      txnWrites = new Set();
      txnOwner = current;
      break;
    case 'commit':
      endTransaction(true);
      break;
    case 'rollback':
      endTransaction(false);
      break;
    default:
      break;
  }
}

function endTransaction(applied) {
  if (applied && txnWrites) for (const c of txnWrites) changed.add(c);
  txnWrites = null;
  txnOwner = null;
}

// Every statement the database runs, the page's or a worker module's
// (call()), is noted: the collections writes change, and where transactions
// begin and end.
function instrument(d) {
  const proto = Object.getPrototypeOf(d);
  const tracked = (c, f) => {
    let r;
    try {
      r = f();
    } catch (e) {
      landed(c, false);
      throw e;
    }
    landed(c, true);
    return r;
  };
  d.query = (text, params) => tracked(classify(text), () => proto.query.call(d, text, params));
  d.queryJSON = (text, params) => tracked(classify(text), () => proto.queryJSON.call(d, text, params));
  d.batch = (statements) => {
    const r = proto.batch.call(d, statements);
    for (const s of statements) landed(classify(Array.isArray(s) ? s[0] : s), true);
    return r;
  };
  d.prepare = (text) => {
    const st = proto.prepare.call(d, text);
    const c = classify(text);
    if (c.kind !== 'read') {
      const query = st.query;
      const queryJSON = st.queryJSON;
      st.query = (params) => tracked(c, () => query.call(st, params));
      st.queryJSON = (params) => tracked(c, () => queryJSON.call(st, params));
    }
    return st;
  };
  return d;
}

// Tells every tab (shared) or the page (exclusive) which collections changed.
function announceChanges() {
  if (!changed.size) return;
  const collections = [...changed].sort();
  changed.clear();
  if (shared) shared.control.postMessage({ type: 'change', collections, leader: shared.leader });
  else postMessage({ event: 'change', collections });
}

// ---- requests, one at a time --------------------------------------------------

const waiting = []; // { client, id, op, args, priority }
let running = false;

// While a transaction is open only its owner's requests run.
const runnable = (r) => txnOwner === null || r.client === txnOwner || r.priority;

function enqueue(r) {
  waiting.push(r);
  pump();
}

async function pump() {
  if (running) return;
  running = true;
  try {
    for (;;) {
      const i = waiting.findIndex(runnable);
      if (i < 0) break;
      const [r] = waiting.splice(i, 1);
      await handle(r);
    }
  } finally {
    running = false;
  }
}

function reply(r, m, transfer = []) {
  if (r.id === 0 || r.client.gone) return;
  try {
    r.client.post(m, transfer);
  } catch (e) {
    r.client.post({ id: m.id, ok: false, error: errorOf(invalid(`the answer cannot be sent: ${e && e.message ? e.message : e}`)) });
  }
}

async function handle(r) {
  current = r.client;
  let m;
  let transfer = [];
  try {
    const f = ops[r.op];
    if (!f) throw invalid(`unknown operation '${r.op}'`);
    const value = await f(r.args || [], r);
    m = { id: r.id, ok: true, value };
    // Rows and an export's bytes are made for this answer: their buffers
    // go to the page. What a module's call returns may be its own (a
    // vector it keeps): that is copied.
    if (!r.client.remote && r.op !== 'call') transfer = [...transferables(value)];
  } catch (e) {
    m = { id: r.id, ok: false, error: errorOf(e) };
  } finally {
    current = null;
  }
  announceChanges();
  reply(r, m, transfer);
  // The module failed (out of memory): every call here would fail from
  // now. Shared, the page hears of it as of a worker that died, so that
  // another tab (or this one, with a new worker and module) takes over.
  if (shared && db && db._core.kfBroken && !brokenSaid) {
    brokenSaid = true;
    postMessage({ event: 'broken' });
  }
}
let brokenSaid = false;

function need() {
  if (!db) throw invalid('the database is not open');
  return db;
}

function statement(client, id, text) {
  need();
  let st = client.statements.get(id);
  if (!st) {
    // Prepared on a leader that has gone since: prepared again here.
    if (typeof text !== 'string') throw invalid('the statement was finalized');
    st = db.prepare(text);
    client.statements.set(id, st);
  }
  return st;
}

function extensionFor(url) {
  if (url === undefined || url === null || url === extensionUrl) return Promise.resolve(extension);
  let p = extensions.get(url);
  if (!p) {
    p = import(/* webpackIgnore: true */ /* @vite-ignore */ url);
    p.catch(() => extensions.delete(url));
    extensions.set(url, p);
  }
  return p;
}

async function closeDatabase() {
  if (!db) return;
  const d = db;
  db = null;
  for (const c of [page, ...clients.values()]) c.statements.clear();
  txnOwner = null;
  txnWrites = null;
  await d.close();
}

// A tab that takes over right after its leader's tab went away finds that
// leader's worker still holding the file for a moment (or, busy in a long
// call, for seconds): its epoch lock says so.
async function dyingLeader(name) {
  if (!navigator.locks || typeof navigator.locks.query !== 'function') return false;
  const prefix = tabs.epochPrefix(name);
  const { held = [] } = await navigator.locks.query();
  return held.some((l) => typeof l.name === 'string' && l.name.startsWith(prefix) && l.name.length === prefix.length + 36);
}

// Serves other tabs: holds the epoch lock for this worker's life, listens
// for requests and announces itself.
async function serve({ name, leader, client }) {
  await new Promise((resolve, reject) => {
    navigator.locks.request(tabs.epochLock(name, leader), () => {
      resolve();
      return new Promise(() => {}); // until this worker ends
    }).catch(reject);
  });
  page.id = client;
  const control = new BroadcastChannel(tabs.controlChannel(name));
  const requests = new BroadcastChannel(tabs.requestChannel(name, leader));
  shared = { name, leader, control, requests, resigning: false, drain: null };
  const announce = { type: 'leader', leader };
  control.onmessage = (ev) => {
    if (ev.data && ev.data.type === 'who' && !shared.resigning) control.postMessage(announce);
  };
  requests.onmessage = (ev) => fromTab(ev.data);
  control.postMessage(announce);
}

function fromTab(m) {
  if (!m || typeof m !== 'object' || typeof m.client !== 'string') return;
  if (m.type === 'drained') {
    const d = shared.drain;
    if (d) {
      d.delete(m.client);
      if (d.size === 0) d.done();
    }
    return;
  }
  if (m.op === 'bye') {
    const c = clients.get(m.client);
    if (c) clientGone(c);
    return;
  }
  const c = remoteClient(m.client);
  if (shared.resigning || !db) {
    c.post({ id: m.id, moved: true });
    return;
  }
  // hello (a connect's first call) runs beside another tab's open
  // transaction: it reads nothing, and a connect must not wait for a commit.
  enqueue({ client: c, id: m.id, op: m.op, args: m.args, priority: m.op === 'hello' });
}

const ops = {
  async open([target, options = {}]) {
    if (db) throw invalid('this connection has a database open already');
    const { module: moduleUrl, shared: share, ...openOptions } = options;
    if (share) {
      const given = openOptions.lockTimeout;
      if (given === undefined || (typeof given === 'number' && given >= 0)) {
        if (share.takeover || (await dyingLeader(share.name))) openOptions.lockTimeout = Math.max(given ?? 0, tabs.TAKEOVER_WAIT_MS);
      }
    }
    const t0 = performance.now();
    // The file opens (OPFS: lock, handles) while the WASM module and
    // options.module finish loading; Kitfox.open waits for the former.
    const opening = Kitfox.open(target, openOptions);
    const [loaded, mod, opened] = await Promise.allSettled([loading, moduleUrl ? extensionFor(moduleUrl) : null, opening]);
    const t2 = performance.now();
    const failed = loaded.value?.error ?? (mod.status === 'rejected' ? mod.reason : null) ?? (opened.status === 'rejected' ? opened.reason : null);
    if (failed) {
      if (opened.status === 'fulfilled') await opened.value.close();
      throw failed;
    }
    extension = mod.value;
    extensionUrl = moduleUrl ?? null;
    db = instrument(opened.value);
    if (share) {
      try {
        await serve(share);
      } catch (e) {
        await closeDatabase();
        throw e;
      }
    }
    // startMs: from the worker's creation to this module running (its
    // imports fetched and evaluated); loadMs: the WASM module's load from
    // then (overlapping the page's message); openMs: Kitfox.open, which
    // overlaps the end of that load and options.module's import.
    // readsOnDemand: vector tables and graphs are read block by block on
    // first use (OPFS reads are cheap), not with the whole file on open.
    return { startMs: started, loadMs: loaded.value.ms, openMs: t2 - t0, readsOnDemand: db._host.readChunk === 0 };
  },
  hello: () => ({ readsOnDemand: need()._host.readChunk === 0, leader: shared ? shared.leader : null }),
  prepare([id, text], r) {
    const st = need().prepare(text);
    r.client.statements.get(id)?.finalize();
    r.client.statements.set(id, st);
  },
  run: ([id, params, text], r) => statement(r.client, id, text).query(params),
  runJSON: ([id, params, text], r) => statement(r.client, id, text).queryJSON(params),
  finalize([id], r) {
    r.client.statements.get(id)?.finalize();
    r.client.statements.delete(id);
  },
  query: ([text, params]) => need().query(text, params),
  queryJSON: ([text, params]) => need().queryJSON(text, params),
  batch: ([statements]) => need().batch(statements),
  near: ([collection, field, vector, options]) => need().near(collection, field, vector, options),
  checkpoint: () => need().checkpoint(),
  sync: () => need().sync(),
  export: () => need().export(),
  stats: () => need().stats(),
  async call([name, args, moduleUrl], r) {
    const d = need();
    // The caller's module: a connection that gave none has none here
    // either, whatever this worker's own page gave.
    if (moduleUrl === undefined || moduleUrl === null)
      throw invalid(`no worker module was given to connect() (its module option), so there is no function '${name}'`);
    const ext = await extensionFor(moduleUrl);
    if (!ext || typeof ext[name] !== 'function')
      throw invalid(`the worker module has no function '${name}'`);
    const progress = (value) => {
      announceChanges(); // what the call wrote so far
      if (!r.client.gone) r.client.post({ id: r.id, progress: value });
    };
    return await ext[name](d, args, progress);
  },
  // A connection that is gone, or said goodbye.
  bye(args, r) {
    const c = r.client;
    if (c.gone) return;
    c.gone = true;
    for (const st of c.statements.values()) {
      try {
        st.finalize();
      } catch {
        // the module was given up: nothing to free
      }
    }
    c.statements.clear();
    if (txnOwner === c) {
      try {
        db?.query('rollback');
      } catch {
        // nothing was open after all
      }
      endTransaction(false);
    }
    c.channel?.close();
    clients.delete(c.id);
  },
  // Exclusive: closes the database (the page then ends this worker).
  close: () => closeDatabase(),
  // Shared: the leader's page closes. The requests of other tabs not run
  // yet, and any that come, are answered 'moved' (the next leader runs
  // them); the file is closed, so the next leader can open it. Then, once
  // each follower said it sends nothing more (or DRAIN_MS), 'drained'.
  async resign() {
    if (!shared) return closeDatabase();
    // Who must say they send nothing more, listened for before the
    // followers hear of it: their 'drained' may come while the file closes
    // (it was dropped, and close() always waited DRAIN_MS).
    const expect = new Set([...clients.values()].filter((c) => !c.gone).map((c) => c.id));
    let closed = false, late = false, done = false;
    const finish = () => {
      if (done || !closed || (expect.size > 0 && !late)) return;
      done = true;
      shared.drain = null;
      postMessage({ event: 'drained' });
    };
    expect.done = finish;
    shared.drain = expect;
    shared.resigning = true;
    shared.control.postMessage({ type: 'resigning', leader: shared.leader });
    for (let i = waiting.length - 1; i >= 0; i--) {
      const r = waiting[i];
      if (r.client.remote && r.id !== 0) {
        waiting.splice(i, 1);
        r.client.post({ id: r.id, moved: true });
      }
    }
    await closeDatabase();
    closed = true;
    finish();
    if (!done)
      setTimeout(() => {
        late = true;
        finish();
      }, tabs.DRAIN_MS);
  },
};

self.onmessage = (ev) => {
  const m = ev.data;
  if (m && m.op === 'module') {
    provideCompiledWasm(m.module);
    return;
  }
  // The page's own: resign goes ahead of another tab's open transaction.
  enqueue({ client: page, id: m.id, op: m.op, args: m.args, priority: m.op === 'resign' || m.op === 'open' || m.op === 'hello' });
};
