// Makes a database of N documents with a dim-dimensional clustered vector
// under an HNSW index, natively (the CLI's import: faster than building in
// WASM, and the file is the same byte for byte), for the browser tests and
// the browser benchmark to copy into OPFS.
//
//   node bench/browser/make-db.js OUT.kfdb [--n 100000] [--dim 128] [--m 16] [--ef-construction 200]
//   import { makeDatabase } from './make-db.js'
//
// Documents: {title: "doc N", category: "cK", embed: vector<dim>}; vectors
// are unit-norm points around 64 seeded centres (the same every run).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// The native CLI: build/ (scripts/build.sh) or build-bench/ (scripts/bench.sh).
export const cli = [path.join(root, 'build', 'kitfox'), path.join(root, 'build-bench', 'kitfox')].find((p) => fs.existsSync(p)) ?? path.join(root, 'build', 'kitfox');

// splitmix64 over BigInt is slow; a 32-bit mulberry is enough for test data.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A generator of clustered unit vectors: next() returns [cluster, Float32Array].
export function clustered(dim, clusters = 64, seed = 42, spread = 0.25) {
  const r = rng(seed);
  const gauss = () => {
    const u = Math.max(r(), 1e-300);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  };
  const normalise = (v) => {
    let s = 0;
    for (const x of v) s += x * x;
    s = Math.sqrt(s) || 1;
    for (let i = 0; i < v.length; i++) v[i] /= s;
    return v;
  };
  const centres = [];
  for (let c = 0; c < clusters; c++) centres.push(normalise(Float32Array.from({ length: dim }, gauss)));
  const sd = spread / Math.sqrt(dim);
  return () => {
    const c = Math.floor(r() * clusters);
    const v = new Float32Array(dim);
    for (let i = 0; i < dim; i++) v[i] = centres[c][i] + gauss() * sd;
    return [c, normalise(v)];
  };
}

// The file format version this checkout writes (core/storage/format.h).
export function formatVersion() {
  const src = fs.readFileSync(path.join(root, 'core', 'storage', 'format.h'), 'utf8');
  return Number(/constexpr uint32_t kVersion = (\d+);/.exec(src)[1]);
}

// True when `file` exists and was written in this checkout's format version
// (a cached database from before a format change is made again).
export function cachedDatabase(file) {
  if (!fs.existsSync(file)) return false;
  const head = Buffer.alloc(12);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, head, 0, 12, 0);
  } finally {
    fs.closeSync(fd);
  }
  return head.toString('latin1', 0, 8) === 'KITFOXDB' && head.readUInt32LE(8) === formatVersion();
}

export function makeDatabase({ out, n = 100000, dim = 128, m = 16, efConstruction = 200, log = () => {} }) {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: bash scripts/build.sh`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-makedb-'));
  try {
    const data = path.join(tmp, 'docs.ndjson');
    const fd = fs.openSync(data, 'w');
    const next = clustered(dim);
    let buf = '';
    for (let i = 1; i <= n; i++) {
      const [c, v] = next();
      buf += `{"id":${i},"title":"doc ${i}","category":"c${c % 16}","embed":[${Array.from(v, (x) => x.toFixed(6)).join(',')}]}\n`;
      if (buf.length > 1 << 22) {
        fs.writeSync(fd, buf);
        buf = '';
      }
    }
    fs.writeSync(fd, buf);
    fs.closeSync(fd);
    const db = path.join(tmp, 'db.kfdb');
    const t0 = Date.now();
    execFileSync(cli, [
      db,
      '-c',
      `create collection docs (title text, category text, embed vector<${dim}> @hnsw(cosine, m=${m}, ef_construction=${efConstruction}))`,
    ]);
    execFileSync(cli, ['import', db, 'docs', data, '--batch', '10000'], { stdio: ['ignore', 'ignore', 'inherit'] });
    execFileSync(cli, ['checkpoint', db]);
    log(`made ${out}: ${n} x ${dim}, m=${m}, ef_construction=${efConstruction}, in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    fs.renameSync(db, out);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, d) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : d;
  };
  const out = args.find((a, i) => !a.startsWith('--') && (i === 0 || !args[i - 1].startsWith('--')));
  if (!out) {
    console.error('usage: node bench/browser/make-db.js OUT.kfdb [--n N] [--dim D] [--m M] [--ef-construction E]');
    process.exit(2);
  }
  makeDatabase({
    out,
    n: opt('--n', 100000),
    dim: opt('--dim', 128),
    m: opt('--m', 16),
    efConstruction: opt('--ef-construction', 200),
    log: console.log,
  });
}
