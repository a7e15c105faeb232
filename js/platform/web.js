// Browsers, workers and edge runtimes: the glue built for the web and
// workers only (dist/kitfox-core.web.js: no require(), no Node branch, so
// bundlers have nothing to externalize), the wasm fetched next to the
// package's files (bundlers see `new URL('...', import.meta.url)` and emit
// it as an asset), and a database name opens over OPFS (js/hosts/opfs.js),
// which needs a dedicated worker: its FileSystemSyncAccessHandle exists only
// there. From a page's main thread use kitfox/worker (js/worker.js), which
// runs this in a worker. ':memory:' and a Uint8Array open anywhere.
import createCore from '../../dist/kitfox-core.web.js';
import { instantiateCore } from '../core.js';
import { KitfoxError, kitfoxError } from '../errors.js';
import { OpfsHost, opfsAvailable } from '../hosts/opfs.js';

export const platform = 'web';
export { createCore };

// Made when first needed, not at import: a host without import.meta.url (a
// bundle for an edge runtime) can still import this and pass the `wasm`
// open option.
function wasmUrl() {
  return new URL('../../dist/kitfox-core.wasm', import.meta.url);
}

export async function loadWasmBinary() {
  const url = wasmUrl();
  const r = await fetch(url);
  if (!r.ok) throw kitfoxError('io', `loading ${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

// The compiled module: compileStreaming (which also lets the browser cache
// the compiled code), or from its bytes where streaming is missing or the
// server does not say application/wasm. Compiled once per realm; in
// kitfox/worker's worker, by the page instead when it sends its own (see
// expectCompiledWasm).
let compiling = null;
let provided = null; // a Promise of a module compiled elsewhere, or of null

// `given`: a module (or a Promise of one) to use instead of fetching, when
// nothing was compiled yet (connect()'s `wasm` option, compiled on the page).
export function compileWasm(given) {
  if (!compiling) {
    compiling = (async () => {
      const module = given ? await given : provided ? await provided : null;
      if (module instanceof WebAssembly.Module) return module;
      const url = wasmUrl();
      if (typeof WebAssembly.compileStreaming === 'function') {
        const r = await fetch(url);
        if (!r.ok) throw kitfoxError('io', `loading ${url}: HTTP ${r.status}`);
        if ((r.headers.get('content-type') || '').startsWith('application/wasm')) return WebAssembly.compileStreaming(r);
        return WebAssembly.compile(await r.arrayBuffer());
      }
      return WebAssembly.compile(await loadWasmBinary());
    })();
    compiling.catch(() => {
      compiling = null; // a later open tries again
    });
  }
  return compiling;
}

// In kitfox/worker's worker: the page compiles the module while the worker
// starts (its compile overlaps the fetch of the worker's own modules) and
// posts it; compileWasm() waits for that, and compiles here when the page
// sends null.
export function expectCompiledWasm() {
  if (provided) return;
  let resolve;
  provided = new Promise((r) => {
    resolve = r;
  });
  provided.resolve = resolve;
}

export function provideCompiledWasm(module) {
  expectCompiledWasm();
  provided.resolve(module instanceof WebAssembly.Module ? module : null);
}

// The Emscripten module over the compiled module.
export async function loadCore() {
  return instantiateCore(createCore, await compileWasm());
}

// Releases still under way (handles closed, side file removal and Web Lock
// pending), by name: an open of the same name in this worker waits for them.
const releasing = new Map();

export async function openFileHost(name, options = {}) {
  if (!opfsAvailable()) {
    throw kitfoxError(
      'invalid',
      `cannot open '${name}': opening a database by name needs OPFS (FileSystemSyncAccessHandle), which exists only in a dedicated worker; from a page use connect() from kitfox/worker, or open ':memory:' or a Uint8Array`,
    );
  }
  const pending = releasing.get(name);
  if (pending) await pending;
  let host;
  try {
    const lockTimeout = options.lockTimeout ?? 0;
    if (typeof lockTimeout !== 'number' || !(lockTimeout >= 0))
      throw kitfoxError('invalid', `lockTimeout must be a number of milliseconds, got ${String(lockTimeout)}`);
    host = await OpfsHost.open(name, { create: options.create !== false, lockTimeout, readsOnDemand: options.readsOnDemand ?? undefined });
  } catch (e) {
    if (e instanceof KitfoxError) throw e;
    throw new KitfoxError(e && e.code ? e.code : 'io', e && e.message ? e.message : String(e));
  }
  const release = host.release.bind(host);
  host.release = () => {
    release();
    const done = host.released.finally(() => {
      if (releasing.get(name) === done) releasing.delete(name);
    });
    releasing.set(name, done);
  };
  return { host, name };
}
