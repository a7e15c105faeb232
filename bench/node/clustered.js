// The clustered embedding generator of bench/clustered.h, ported to
// JavaScript so the Node benchmarks (bench/node/peers.js) use the very data
// the native ones do: the same splitmix-style generator (64-bit arithmetic
// done on two 32-bit halves), the same Box-Muller transform, and the same
// float32 rounding at every step (the native build has no fused
// multiply-add: -ffp-contract=off).
//
// `clusters` centres are drawn on the unit sphere (seed 42 by default); a
// point is a centre plus Gaussian noise of standard deviation
// spread/sqrt(dim) per dimension (norm about `spread`, 0.25), and the stream
// seed decides both which centre each point comes from and its noise. The
// benchmarks draw the data from stream 1 and the held-out queries from
// another stream, so queries are never members of the data set.
//
//   import { Clustered } from './clustered.js';
//   const gen = new Clustered(128, 40);            // centres from seed 42
//   const { vectors, clusterOf } = gen.points(20000, 1);
//   // vectors: Float32Array(n * dim), row-major; clusterOf: Uint32Array(n)
//
// `node bench/node/clustered.js DIM CLUSTERS N SEED` prints the points as
// hex float bits, one line per point, to compare with the C++ generator.

const GOLDEN_HI = 0x9e3779b9;
const GOLDEN_LO = 0x7f4a7c15;
const M1_HI = 0xbf58476d;
const M1_LO = 0x1ce4e5b9;
const M2_HI = 0x94d049bb;
const M2_LO = 0x133111eb;

// High 32 bits of the 64-bit product of two unsigned 32-bit numbers, from
// 16-bit pieces (every partial product is exact in a double).
function mulhi32(a, b) {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const p01 = a0 * b1;
  const p10 = a1 * b0;
  const mid = ((a0 * b0) >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  return (a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16)) >>> 0;
}

// The 64-bit product (mod 2^64) of (ah, al) and (bh, bl), into out[0..1] = hi, lo.
function mul64(ah, al, bh, bl, out) {
  out[1] = Math.imul(al, bl) >>> 0;
  out[0] = (mulhi32(al, bl) + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** bench::Rng: splitmix64 steps over a state seeded with seed * golden + 1. */
export class Rng {
  constructor(seed) {
    const t = [0, 0];
    // seed < 2^53: split it into halves.
    const sh = Math.floor(seed / 4294967296) >>> 0;
    const sl = seed >>> 0;
    mul64(sh, sl, GOLDEN_HI, GOLDEN_LO, t);
    const lo = t[1] + 1;
    this.lo = lo >>> 0;
    this.hi = (t[0] + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    this.t = t;
    // The last output of next(), as halves.
    this.outHi = 0;
    this.outLo = 0;
  }

  /** One 64-bit output, left in this.outHi / this.outLo. */
  next() {
    const t = this.t;
    const lo = this.lo + GOLDEN_LO;
    this.lo = lo >>> 0;
    this.hi = (this.hi + GOLDEN_HI + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    let h = this.hi;
    let l = this.lo;
    // x = (x ^ (x >> 30)) * M1
    l = (l ^ ((l >>> 30) | (h << 2))) >>> 0;
    h = (h ^ (h >>> 30)) >>> 0;
    mul64(h, l, M1_HI, M1_LO, t);
    h = t[0];
    l = t[1];
    // x = (x ^ (x >> 27)) * M2
    l = (l ^ ((l >>> 27) | (h << 5))) >>> 0;
    h = (h ^ (h >>> 27)) >>> 0;
    mul64(h, l, M2_HI, M2_LO, t);
    h = t[0];
    l = t[1];
    // x ^ (x >> 31)
    this.outLo = (l ^ ((l >>> 31) | (h << 1))) >>> 0;
    this.outHi = (h ^ (h >>> 31)) >>> 0;
  }

  /** next() mod m, for a small m (exact: every term is below 2^53). */
  nextMod(m) {
    this.next();
    return ((this.outHi % m) * (4294967296 % m) + (this.outLo % m)) % m;
  }

  /** Uniform in [0, 1): the top 53 bits of next(), over 2^53. */
  uniform() {
    this.next();
    return (this.outHi * 2097152 + (this.outLo >>> 11)) * (1.0 / 9007199254740992.0);
  }

  /** A standard normal variate (Box-Muller, the cosine branch only). */
  gauss() {
    let u = this.uniform();
    const v = this.uniform();
    if (u < 1e-300) u = 1e-300;
    return Math.sqrt(-2.0 * Math.log(u)) * Math.cos(6.283185307179586 * v);
  }
}

/** bench::Clustered. */
export class Clustered {
  constructor(dim, clusters, seed = 42, spread = 0.25) {
    this.dim = dim;
    this.clusters = clusters;
    this.spread = Math.fround(spread);
    const r = new Rng(seed);
    const c = new Float32Array(clusters * dim);
    for (let k = 0; k < clusters; k++) {
      let n2 = 0;
      for (let i = 0; i < dim; i++) {
        const g = r.gauss();
        c[k * dim + i] = g; // (float)g
        n2 += g * g;
      }
      const inv = Math.fround(1.0 / Math.sqrt(n2));
      // float * float, rounded to float by the store (the exact product fits a double).
      for (let i = 0; i < dim; i++) c[k * dim + i] = c[k * dim + i] * inv;
    }
    this.centres = c;
  }

  /**
   * n points from stream `seed`: {vectors: Float32Array(n * dim), clusterOf:
   * Uint32Array(n)}.
   */
  points(n, seed) {
    const { dim, clusters, centres } = this;
    const r = new Rng(seed);
    const out = new Float32Array(n * dim);
    const clusterOf = new Uint32Array(n);
    const noise = Math.fround(this.spread / Math.fround(Math.sqrt(dim)));
    for (let p = 0; p < n; p++) {
      const c = r.nextMod(clusters);
      clusterOf[p] = c;
      const base = c * dim;
      const o = p * dim;
      for (let i = 0; i < dim; i++) {
        out[o + i] = centres[base + i] + Math.fround(noise * Math.fround(r.gauss()));
      }
    }
    return { vectors: out, clusterOf };
  }
}

// CLI: dump points as hex float bits (for comparison with the C++ generator).
if (import.meta.url === `file://${process.argv[1]}`) {
  const [dim, clusters, n, seed] = process.argv.slice(2).map(Number);
  const gen = new Clustered(dim, clusters);
  const { vectors, clusterOf } = gen.points(n, seed);
  const bits = new Uint32Array(vectors.buffer);
  const lines = [];
  for (let p = 0; p < n; p++) {
    const row = [clusterOf[p]];
    for (let i = 0; i < dim; i++) row.push(bits[p * dim + i].toString(16).padStart(8, '0'));
    lines.push(row.join(' '));
  }
  process.stdout.write(lines.join('\n') + '\n');
}
