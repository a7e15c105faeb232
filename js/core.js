// The WASM module: loaded once per process (or worker) and shared by every
// open database. Holds the table of host objects the C++ file layer calls
// into (wasm/host_file.cpp calls Module.kfHostCall). The Emscripten glue
// comes from the platform layer: Node's (dist/kitfox-core.js) or the web
// one (dist/kitfox-core.web.js, no Node code), over the same .wasm.
import { currentPlatform } from './platform/current.js';
import { KitfoxError, kitfoxError } from './errors.js';

// Host error codes as kitfox::Code values (core/status.h).
const HOST_CODES = { not_found: 3, locked: 10, io: 8, invalid: 12 };

let loading = null;

// A call into the module that threw instead of returning (a trap: the stack
// ran out, memory could not grow, an abort) leaves the module's state
// unknown, so the module is given up: every database open in it refuses
// further calls with this `failed` error (what was acknowledged before is in
// its file), and the next open loads a new module.
export function trapped(mod, e) {
  if (e instanceof KitfoxError) return e;
  if (!mod.kfBroken) {
    const what = e && e.message ? `${e.name || 'Error'}: ${e.message}` : String(e);
    mod.kfBroken = new KitfoxError('failed', `failed error: the engine stopped on an internal error (${what}); open the database again`, -1);
    if (loading === mod.kfLoaded) loading = null;
  }
  return mod.kfBroken;
}

// `wasm` (the open option): a compiled WebAssembly.Module of
// dist/kitfox-core.wasm, its bytes, or a URL to fetch it from; used when the
// module loads (the first open, or the first after a trap), else ignored.
export function loadCore(wasm) {
  if (!loading) {
    const p = init(wasm).catch((e) => {
      loading = null; // let a later open try again
      throw e;
    });
    loading = p;
    p.then((mod) => (mod.kfLoaded = p), () => {}); // runs before any awaiting open sees the module
  }
  return loading;
}

// A compiled module from what the `wasm` option holds.
export async function compileGiven(wasm) {
  wasm = await wasm;
  if (wasm instanceof WebAssembly.Module) return wasm;
  if (wasm instanceof Uint8Array || wasm instanceof ArrayBuffer) return WebAssembly.compile(wasm);
  if (typeof wasm === 'string' || wasm instanceof URL) {
    const r = await fetch(wasm);
    if (!r.ok) throw kitfoxError('io', `loading ${String(wasm)}: HTTP ${r.status}`);
    if (typeof WebAssembly.compileStreaming === 'function' && (r.headers.get('content-type') || '').startsWith('application/wasm'))
      return WebAssembly.compileStreaming(r);
    return WebAssembly.compile(await r.arrayBuffer());
  }
  throw kitfoxError('invalid', `the wasm option takes a WebAssembly.Module, its bytes or a URL, got ${String(wasm)}`);
}

// Runs the Emscripten factory over an already compiled module: the glue
// neither fetches nor compiles anything (hosts such as Cloudflare Workers
// forbid compiling from bytes), and locateFile keeps it from building a URL
// from import.meta.url, which some hosts lack.
export function instantiateCore(createCore, module, extra = {}) {
  return new Promise((resolve, reject) => {
    createCore({
      ...extra,
      locateFile: (file) => file,
      instantiateWasm(imports, receive) {
        WebAssembly.instantiate(module, imports).then((instance) => receive(instance, module), reject);
        return {};
      },
    }).then(resolve, reject);
  });
}

async function init(wasm) {
  // The platform compiles the module (web: while it downloads, letting the
  // browser cache the compiled code) or hands the glue its bytes (Node).
  const p = currentPlatform();
  const mod = wasm !== undefined && wasm !== null ? await instantiateCore(p.createCore, await compileGiven(wasm)) : await p.loadCore();
  const hosts = new Map();
  let nextHost = 1;

  mod.kfHostCall = (id, method, args) => {
    try {
      const host = hosts.get(id);
      const r = host[method](...args);
      return r === true ? 1 : r === false || r === undefined ? 0 : r;
    } catch (e) {
      mod.kfHostError = {
        code: HOST_CODES[e && e.code] ?? HOST_CODES.io,
        message: e && e.message ? e.message : String(e),
      };
      return -1;
    }
  };
  mod.kfAddHost = (host) => {
    const id = nextHost++;
    hosts.set(id, host);
    return id;
  };
  mod.kfRemoveHost = (id) => hosts.delete(id);
  // The error of the last failed call.
  mod.kfLastError = () => new KitfoxError(mod.kfErrorCode(), mod.kfErrorText(), mod.kfErrorPosition());
  return mod;
}
