// Browsers, workers and edge runtimes: the wasm bytes are fetched next to the
// package's files. A database name needs a file system: the OPFS host (a
// FileSystemSyncAccessHandle in a dedicated worker) plugs in here; until it
// does, ':memory:' and a Uint8Array open anywhere.
import { kitfoxError } from '../errors.js';

export const platform = 'web';

export async function loadWasmBinary() {
  const url = new URL('../../dist/kitfox-core.wasm', import.meta.url);
  const r = await fetch(url);
  if (!r.ok) throw kitfoxError('io', `loading ${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

export async function openFileHost(name) {
  throw kitfoxError(
    'invalid',
    `cannot open '${name}': opening a database by name needs Node.js or (coming) OPFS in a worker; use ':memory:' or a Uint8Array here`,
  );
}
