// The dedicated worker behind kitfox/worker (js/worker.js): runs one database
// over OPFS and answers the page's messages.
//
//   page -> worker   { id, op, args }      op: open, query, queryJSON, batch,
//                                           near, prepare, run, runJSON,
//                                           finalize, checkpoint, sync,
//                                           export, stats, call, close
//   worker -> page   { id, ok: true, value } | { id, ok: false, error }
//                    { id, progress }       (from a `call`, any number of times)
//
// Errors cross as { code, message, position } and become KitfoxError again.
// Float32Array vectors in rows (each over its own buffer) and exported bytes
// are transferred, not copied.
import { Kitfox, KitfoxError } from './browser.js';
import { expectCompiledWasm, provideCompiledWasm } from './platform/web.js';
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
let extension = null;
let queue = Promise.resolve(); // one message at a time, in order

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

// The page's prepared statements, by the id it holds.
const statements = new Map();
let nextStatement = 1;

function statement(id) {
  need();
  const st = statements.get(id);
  if (!st) throw new KitfoxError('invalid', 'invalid error: the statement was finalized', -1);
  return st;
}

function need() {
  if (!db) throw new KitfoxError('invalid', 'invalid error: the database is not open', -1);
  return db;
}

const ops = {
  async open([target, options = {}]) {
    if (db) throw new KitfoxError('invalid', 'invalid error: this connection has a database open already', -1);
    const { module: moduleUrl, ...openOptions } = options;
    const t0 = performance.now();
    // The file opens (OPFS: lock, handles) while the WASM module and
    // options.module finish loading; Kitfox.open waits for the former.
    const opening = Kitfox.open(target, openOptions);
    const [loaded, mod, opened] = await Promise.allSettled([loading, moduleUrl ? import(/* webpackIgnore: true */ /* @vite-ignore */ moduleUrl) : null, opening]);
    const t2 = performance.now();
    const failed = loaded.value?.error ?? (mod.status === 'rejected' ? mod.reason : null) ?? (opened.status === 'rejected' ? opened.reason : null);
    if (failed) {
      if (opened.status === 'fulfilled') await opened.value.close();
      throw failed;
    }
    extension = mod.value;
    db = opened.value;
    // startMs: from the worker's creation to this module running (its
    // imports fetched and evaluated); loadMs: the WASM module's load from
    // then (overlapping the page's message); openMs: Kitfox.open, which
    // overlaps the end of that load and options.module's import.
    // readsOnDemand: vector tables and graphs are read block by block on
    // first use (OPFS reads are cheap), not with the whole file on open.
    return { startMs: started, loadMs: loaded.value.ms, openMs: t2 - t0, readsOnDemand: db._host.readChunk === 0 };
  },
  prepare([text]) {
    const st = need().prepare(text);
    statements.set(nextStatement, st);
    return nextStatement++;
  },
  run: ([id, params]) => statement(id).query(params),
  runJSON: ([id, params]) => statement(id).queryJSON(params),
  finalize([id]) {
    statements.get(id)?.finalize();
    statements.delete(id);
  },
  query: ([text, params]) => need().query(text, params),
  queryJSON: ([text, params]) => need().queryJSON(text, params),
  batch: ([statements]) => need().batch(statements),
  near: ([collection, field, vector, options]) => need().near(collection, field, vector, options),
  checkpoint: () => need().checkpoint(),
  sync: () => need().sync(),
  export: () => need().export(),
  stats: () => need().stats(),
  async call([name, args], id) {
    const d = need();
    if (!extension || typeof extension[name] !== 'function')
      throw new KitfoxError('invalid', `invalid error: the worker module has no function '${name}'`, -1);
    const progress = (value) => postMessage({ id, progress: value });
    return await extension[name](d, args, progress);
  },
  async close() {
    if (!db) return;
    const d = db;
    db = null;
    statements.clear();
    await d.close();
  },
};

async function handle({ id, op, args }) {
  try {
    const f = ops[op];
    if (!f) throw new KitfoxError('invalid', `invalid error: unknown operation '${op}'`, -1);
    const value = await f(args || [], id);
    postMessage({ id, ok: true, value }, [...transferables(value)]);
  } catch (e) {
    postMessage({ id, ok: false, error: errorOf(e) });
  }
}

self.onmessage = (ev) => {
  if (ev.data && ev.data.op === 'module') {
    provideCompiledWasm(ev.data.module);
    return;
  }
  queue = queue.then(() => handle(ev.data));
};
