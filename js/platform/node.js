// Node.js (and Deno and Bun, which resolve the package's `node` condition):
// the glue built for Node (dist/kitfox-core.js), the wasm bytes from the
// package's dist/, and a database name is a path, opened through the Node
// host under a writer lock.
import fs from 'node:fs';
import path from 'node:path';

import createCore from '../../dist/kitfox-core.js';
import { NodeHost } from '../hosts/node.js';
import { acquireLock } from '../hosts/node-lock.js';

export const platform = 'node';
export { createCore };

export async function loadWasmBinary() {
  return fs.readFileSync(new URL('../../dist/kitfox-core.wasm', import.meta.url));
}

// The Emscripten module, with the wasm bytes handed over.
export async function loadCore() {
  return createCore({ wasmBinary: await loadWasmBinary() });
}

// Returns the host for a database file and the name the engine uses for it.
export async function openFileHost(name, options) {
  const file = path.resolve(name);
  const lock = await acquireLock(file, options.lock);
  return { host: new NodeHost(file, lock), name: file };
}
