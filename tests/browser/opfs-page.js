// OPFS from the page's main thread (async API), for the browser tests to
// set up and inspect files without the engine: list, read, write, remove.
async function dirOf(path, create = false) {
  const parts = path.split('/');
  const file = parts.pop();
  let dir = await navigator.storage.getDirectory();
  for (const p of parts) dir = await dir.getDirectoryHandle(p, { create });
  return { dir, file };
}

export async function list(dirPath = '') {
  let dir = await navigator.storage.getDirectory();
  for (const p of dirPath.split('/').filter(Boolean)) dir = await dir.getDirectoryHandle(p);
  const out = {};
  for await (const [name, h] of dir.entries()) out[name] = h.kind === 'file' ? (await h.getFile()).size : 'dir';
  return out;
}

export async function read(path) {
  const { dir, file } = await dirOf(path);
  const f = await (await dir.getFileHandle(file)).getFile();
  return new Uint8Array(await f.arrayBuffer());
}

export async function write(path, bytes) {
  const { dir, file } = await dirOf(path, true);
  const w = await (await dir.getFileHandle(file, { create: true })).createWritable();
  await w.write(bytes);
  await w.close();
}

// Copies a file served at `url` into OPFS at `path`; returns its size.
export async function fetchInto(url, path) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`GET ${url}: ${r.status}`);
  const { dir, file } = await dirOf(path, true);
  const w = await (await dir.getFileHandle(file, { create: true })).createWritable();
  await r.body.pipeTo(w);
  return (await (await dir.getFileHandle(file)).getFile()).size;
}

export async function remove(path) {
  const { dir, file } = await dirOf(path);
  await dir.removeEntry(file).catch((e) => {
    if (e.name !== 'NotFoundError') throw e;
  });
}

export async function clear() {
  const root = await navigator.storage.getDirectory();
  for await (const name of root.keys()) await root.removeEntry(name, { recursive: true });
}

// Base64 of bytes, to hand them to the test process.
export function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
