// The WASM module: loaded once per process (or worker) and shared by every
// open database. Holds the table of host objects the C++ file layer calls
// into (wasm/host_file.cpp calls Module.kfHostCall). The Emscripten glue
// comes from the platform layer: Node's (dist/kitfox-core.js) or the web
// one (dist/kitfox-core.web.js, no Node code), over the same .wasm.
import { currentPlatform } from './platform/current.js';
import { HostError, KitfoxError, kitfoxError } from './errors.js';

// Host error codes as kitfox::Code values (core/status.h).
const HOST_CODES = { not_found: 3, locked: 10, io: 8, invalid: 12 };

let loading = null;

// What the calls that answer must give back (js/hosts/README.md); the
// others' values are not read. A host that breaks this fails the call with
// 'invalid', as if it threw, so the engine never reads a value that was
// not meant (an async host's Promise, a size of undefined, a BigInt).
const isCount = (r) => typeof r === 'number' && Number.isSafeInteger(r) && r >= 0;
const HOST_RESULTS = {
  open: [(r) => isCount(r) && r <= 0x7fffffff, 'a file id (an integer from 0 to 2^31 - 1)'],
  read: [(r, args) => isCount(r) && r <= args[2].length, 'the number of bytes read (an integer from 0 to the length of dest)'],
  size: [isCount, 'the size in bytes (an integer >= 0)'],
  exists: [(r) => typeof r === 'boolean', 'true or false'],
};

function hostResult(method, r, args) {
  if (r !== null && (typeof r === 'object' || typeof r === 'function') && typeof r.then === 'function') {
    r.then(undefined, () => {}); // no answer either way: not an unhandled rejection
    throw new HostError('invalid', `the host's ${method} returned a Promise: a host's calls are synchronous (docs/wasm.md, "Host file layers")`);
  }
  const want = HOST_RESULTS[method];
  if (!want) return 0;
  if (!want[0](r, args)) {
    const what = typeof r === 'bigint' ? `the BigInt ${r}` : typeof r === 'string' ? `the text ${JSON.stringify(r.slice(0, 40))}` : String(r);
    throw new HostError('invalid', `the host's ${method} returned ${what}, not ${want[1]}`);
  }
  return r === true ? 1 : r === false ? 0 : r;
}

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
      return hostResult(method, hosts.get(id)[method](...args), args);
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
