// Node.js: the wasm bytes come from the package's dist/, and a database name
// is a path, opened through the Node host under a writer lock.
import fs from 'node:fs';
import path from 'node:path';

import { NodeHost } from '../hosts/node.js';
import { acquireLock } from '../hosts/node-lock.js';

export const platform = 'node';

export async function loadWasmBinary() {
  return fs.readFileSync(new URL('../../dist/kitfox-core.wasm', import.meta.url));
}

// Returns the host for a database file and the name the engine uses for it.
export async function openFileHost(name, options) {
  const file = path.resolve(name);
  const lock = await acquireLock(file, options.lock);
  return { host: new NodeHost(file, lock), name: file };
}
