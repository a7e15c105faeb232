// Cloudflare Workers (workerd) and hosts that bundle as wrangler does: the
// web glue over a WebAssembly.Module that comes in as an imported module
// (wrangler's rule for `*.wasm`: a CompiledWasm module), because workerd
// forbids compiling WebAssembly from bytes at run time. There is no file
// system: a database is ':memory:', bytes (Kitfox.open(bytes), written back
// with export()), or a name over a host the application gives (the `host`
// open option; examples/cloudflare-durable-object keeps the file in a
// Durable Object's storage).
import wasmModule from '../../dist/kitfox-core.wasm';
import createCore from '../../dist/kitfox-core.web.js';
import { instantiateCore } from '../core.js';
import { kitfoxError } from '../errors.js';

export const platform = 'workerd';
export { createCore };

export async function loadCore() {
  return instantiateCore(createCore, wasmModule);
}

export async function openFileHost(name) {
  throw kitfoxError(
    'invalid',
    `cannot open '${name}': this runtime has no file system; open ':memory:' or a database file's bytes, or pass a host that keeps the file in your storage ({host}, see docs/wasm.md)`,
  );
}
