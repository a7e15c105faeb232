// Converts an IDX image set (MNIST, Fashion-MNIST: Debian's dataset-fashion-mnist
// ships them in /usr/share/datasets/fashion-mnist) into import input for
// `kitfox import`: one document per image, {"label": L, "v": [784 ints]}.
//
//   node bench/idx2ndjson.mjs DIR SPLIT [--limit N] [--array] [--f32 PATH] > OUT
//
// DIR holds SPLIT-images-idx3-ubyte and SPLIT-labels-idx1-ubyte (gzipped or
// not), SPLIT is train or t10k. Writes NDJSON to standard output, or with
// --array one JSON array (an element per line); --f32 PATH also writes the
// vectors as raw little-endian float32 (N x 784), for the peers that take
// binary vectors. --limit N keeps the first N images.
import fs from 'node:fs';
import zlib from 'node:zlib';

const args = process.argv.slice(2);
const positional = [];
let limit = Infinity;
let array = false;
let f32 = null;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--limit') limit = Number(args[++i]);
  else if (a === '--array') array = true;
  else if (a === '--f32') f32 = args[++i];
  else positional.push(a);
}
if (positional.length !== 2 || !(limit > 0)) {
  process.stderr.write('usage: node bench/idx2ndjson.mjs DIR train|t10k [--limit N] [--array] [--f32 PATH] > OUT\n');
  process.exit(2);
}
const [dir, split] = positional;

function load(base) {
  const gz = `${dir}/${base}.gz`;
  return fs.existsSync(gz) ? zlib.gunzipSync(fs.readFileSync(gz)) : fs.readFileSync(`${dir}/${base}`);
}
const images = load(`${split}-images-idx3-ubyte`);
const labels = load(`${split}-labels-idx1-ubyte`);
if (images.readUInt32BE(0) !== 0x803 || labels.readUInt32BE(0) !== 0x801) throw new Error('not IDX image and label files');
const count = images.readUInt32BE(4);
const dim = images.readUInt32BE(8) * images.readUInt32BE(12);
if (labels.readUInt32BE(4) !== count) throw new Error('the image and label files hold different counts');
const n = Math.min(count, limit);

const out = [];
let pending = 0;
const flush = () => {
  fs.writeSync(1, out.join(''));
  out.length = 0;
  pending = 0;
};
if (array) out.push('[\n');
for (let i = 0; i < n; i++) {
  const px = images.subarray(16 + i * dim, 16 + (i + 1) * dim);
  out.push(`${array && i ? ',\n' : ''}{"label":${labels[8 + i]},"v":[${px.join(',')}]}${array ? '' : '\n'}`);
  if (++pending === 1000) flush();
}
if (array) out.push('\n]\n');
flush();

if (f32) {
  const v = new Float32Array(n * dim);
  for (let i = 0; i < n * dim; i++) v[i] = images[16 + i];
  fs.writeFileSync(f32, Buffer.from(v.buffer));
}
