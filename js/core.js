// The WASM module: loaded once per process (or worker) and shared by every
// open database. Holds the table of host objects the C++ file layer calls
// into (wasm/host_file.cpp calls Module.kfHostCall).
import createKitfoxCore from '../dist/kitfox-core.js';
import { currentPlatform } from './platform/current.js';
import { KitfoxError } from './errors.js';

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

export function loadCore() {
  if (!loading) {
    const p = init().catch((e) => {
      loading = null; // let a later open try again
      throw e;
    });
    loading = p;
    p.then((mod) => (mod.kfLoaded = p), () => {}); // runs before any awaiting open sees the module
  }
  return loading;
}

async function init() {
  // The web layer compiles the module while it downloads (and lets the
  // browser cache the compiled code); Node hands over the bytes.
  const p = currentPlatform();
  const options = p.wasmModuleOptions ? await p.wasmModuleOptions() : { wasmBinary: await p.loadWasmBinary() };
  const mod = await createKitfoxCore(options);
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
