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

// The file a symbolic link leads to, as the native build opens it: its lock
// is then the file's, and a checkpoint renames its new image over the file,
// not over the link. A file not there yet is named by its directory's real
// path (a link to nothing is left as it is).
function realFile(file) {
  try {
    return fs.realpathSync(file);
  } catch {
    try {
      fs.lstatSync(file);
      return file;
    } catch {
      try {
        return path.join(fs.realpathSync(path.dirname(file)), path.basename(file));
      } catch {
        return file;
      }
    }
  }
}

// Returns the host for a database file and the name the engine uses for it.
export async function openFileHost(name, options) {
  const file = realFile(path.resolve(name));
  const lock = await acquireLock(file, options.lock);
  return { host: new NodeHost(file, lock), name: file };
}
