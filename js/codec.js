// Values across the JS/WASM boundary, in the engine's own binary value
// encoding (core/codec.h): parameters are encoded here into one list value
// and decoded in C++ with kitfox::decode_value; rows are encoded in C++ with
// kitfox::encode_value and decoded here. Vectors cross as raw f32 bytes.
//
//   JS in                          engine          JS out
//   null, undefined                null            null
//   boolean                        bool            boolean
//   number, integral, |n| < 2^63   int             number (BigInt beyond 2^53)
//   other number                   float           number
//   bigint (int64 range)           int             number or BigInt, as above
//   string                         text            string
//   Date                           timestamp (ms)  Date
//   Uint8Array, ArrayBuffer        bytes           Uint8Array
//   Float32Array, Float64Array     vector (f32)    Float32Array
//   Array                          list            Array
//   plain object                   object          plain object
import { kitfoxError } from './errors.js';

const TAG = { null: 0, false: 1, true: 2, int: 3, float: 4, text: 5, bytes: 6, timestamp: 7, list: 8, object: 9, f32: 10, f16: 11 };
const MAX_DEPTH = 64;
const TWO63 = 2 ** 63;
const BIG_MIN = -(2n ** 63n);
const BIG_MAX = 2n ** 63n - 1n;

const utf8Encoder = new TextEncoder();
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
export const wellFormed = String.prototype.isWellFormed
  ? (s) => s.isWellFormed()
  : (s) => !LONE_SURROGATE.test(s);
const utf8Decoder = new TextDecoder('utf-8', { ignoreBOM: true }); // a leading U+FEFF is part of the text

// ---------------------------------------------------------------- encoding

export class Encoder {
  constructor(capacity = 1024) {
    this.buf = new Uint8Array(capacity);
    this.view = new DataView(this.buf.buffer);
    this.pos = 0;
  }

  reset() {
    this.pos = 0;
    // A huge batch of params should not pin its buffer forever.
    if (this.buf.length > 16 << 20) {
      this.buf = new Uint8Array(1024);
      this.view = new DataView(this.buf.buffer);
    }
  }

  bytes() {
    return this.buf.subarray(0, this.pos);
  }

  reserve(n) {
    if (this.pos + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.pos + n) cap *= 2;
    const b = new Uint8Array(cap);
    b.set(this.buf.subarray(0, this.pos));
    this.buf = b;
    this.view = new DataView(b.buffer);
  }

  u8(v) {
    this.reserve(1);
    this.buf[this.pos++] = v;
  }

  // An unsigned varint of a Number below 2^53.
  varint(v) {
    this.reserve(10);
    const b = this.buf;
    while (v >= 128) {
      b[this.pos++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    b[this.pos++] = v;
  }

  bigVarint(v) {
    this.reserve(10);
    while (v >= 128n) {
      this.buf[this.pos++] = Number(v & 127n) | 128;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  // A zigzag varint of an integer-valued Number or a BigInt in int64 range.
  int(v) {
    if (typeof v === 'number' && v < 2 ** 52 && v > -(2 ** 52)) {
      this.varint(v >= 0 ? v * 2 : -v * 2 - 1);
    } else {
      const b = BigInt(v);
      this.bigVarint(b >= 0n ? b << 1n : ((-b) << 1n) - 1n);
    }
  }

  text(s) {
    const n = s.length;
    if (n < 64) {
      // Short strings: ASCII by hand (cheaper than a TextEncoder call).
      this.reserve(n + 1);
      const b = this.buf;
      let p = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 127) break;
        b[p++] = c;
      }
      if (i === n) {
        b[this.pos] = n;
        this.pos = p;
        return;
      }
    }
    // UTF-8 has no form for a lone surrogate: refused, as the same \u escape
    // in statement text is (TextEncoder would store U+FFFD silently).
    if (!wellFormed(s)) throw new BadValue('type', 'a string with an unpaired UTF-16 surrogate cannot be stored');
    // Room for the longest varint, then slide the text down to the real one.
    this.reserve(n * 3 + 10);
    const { written } = utf8Encoder.encodeInto(s, this.buf.subarray(this.pos + 5));
    let len = 1;
    for (let v = written; v >= 128; v = Math.floor(v / 128)) len++;
    const start = this.pos + 5;
    this.varint(written);
    if (len !== 5) this.buf.copyWithin(this.pos, start, start + written);
    this.pos += written;
  }

  raw(u8) {
    this.reserve(u8.length);
    this.buf.set(u8, this.pos);
    this.pos += u8.length;
  }

  // Encodes one value. Errors name no path here (no closures on the hot
  // path): encodeParams finds the path of the offending value afterwards.
  value(v, depth) {
    // Any value past the limit, as the engine's decoding counts (a
    // parameter at 0, as given alone).
    if (depth > MAX_DEPTH) throw new BadValue('limit', `nested deeper than ${MAX_DEPTH} levels`);
    switch (typeof v) {
      case 'string':
        this.reserve(1);
        this.buf[this.pos++] = TAG.text;
        this.text(v);
        return;
      case 'number':
        this.reserve(10);
        if (Number.isInteger(v) && v < TWO63 && v >= -TWO63) {
          this.buf[this.pos++] = TAG.int;
          this.int(v);
        } else {
          this.buf[this.pos++] = TAG.float;
          this.reserve(8);
          this.view.setFloat64(this.pos, v, true);
          this.pos += 8;
        }
        return;
      case 'boolean':
        this.u8(v ? TAG.true : TAG.false);
        return;
      case 'bigint':
        if (v < BIG_MIN || v > BIG_MAX) throw new BadValue('type', `${v} is out of the 64-bit integer range`);
        this.u8(TAG.int);
        this.int(v);
        return;
      case 'undefined':
        this.u8(TAG.null);
        return;
      case 'object':
        break;
      default:
        throw new BadValue('type', `a ${typeof v} cannot be stored`);
    }
    if (v === null) {
      this.u8(TAG.null);
    } else if (Array.isArray(v)) {
      this.u8(TAG.list);
      this.varint(v.length);
      for (let i = 0; i < v.length; i++) this.value(v[i], depth + 1);
    } else if (v instanceof Float32Array || v instanceof Float64Array) {
      const f = v instanceof Float32Array ? v : Float32Array.from(v);
      this.u8(TAG.f32);
      this.varint(f.length);
      this.raw(new Uint8Array(f.buffer, f.byteOffset, f.byteLength));
    } else if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
      const u = v instanceof ArrayBuffer ? new Uint8Array(v) : v;
      this.u8(TAG.bytes);
      this.varint(u.length);
      this.raw(u);
    } else if (v instanceof Date) {
      const ms = v.getTime();
      if (Number.isNaN(ms)) throw new BadValue('type', 'an invalid Date');
      this.u8(TAG.timestamp);
      this.int(ms);
    } else {
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) {
        const what = v.constructor?.name || 'object';
        throw new BadValue('type', `a ${what} cannot be stored (use a plain object, an Array, a Float32Array, a Uint8Array or a Date)`);
      }
      const keys = Object.keys(v);
      this.u8(TAG.object);
      this.varint(keys.length);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        this.text(k);
        this.value(v[k], depth + 1);
      }
    }
  }
}

class BadValue extends Error {
  constructor(code, detail) {
    super(detail);
    this.code = code;
  }
}

// The path to the first value the encoder refuses ('$2.tags[3]'), found
// again after a failure; null when none is (the error was elsewhere).
function badPath(v, where, depth) {
  const probe = new Encoder(16);
  try {
    probe.value(v, depth);
    return null;
  } catch {}
  if (v !== null && typeof v === 'object' && depth <= MAX_DEPTH) {
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const p = badPath(v[i], `${where}[${i}]`, depth + 1);
        if (p) return p;
      }
    } else if (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null) {
      for (const k of Object.keys(v)) {
        const p = badPath(v[k], `${where}.${k}`, depth + 1);
        if (p) return p;
      }
    }
  }
  return where;
}

const shared = new Encoder();

// Whether the shared encoder is at work: a getter (or toJSON) of a value
// being encoded that runs a statement would reset it under the encoding,
// and the outer statement would then run with other values than its own.
// Such a call is refused (the outer encoding goes on, whole).
let encoding = false;
function enterShared() {
  if (encoding) throw kitfoxError('invalid', 'kitfox was called while it read the values of another call (from a getter or toJSON of one): values must not run statements');
  encoding = true;
}

// Encodes a parameter array as one list value. Returns a view into a shared
// buffer, valid until the next call.
export function encodeParams(params) {
  encodeParamsShared(params);
  return shared.bytes();
}

// Value `v` (written at `depth`) encoded into e; a value it refuses is
// named by `root` and its path in v ("parameter $2.tags[3]: ...").
function encodeNamed(e, v, root, depth) {
  try {
    e.value(v, depth);
  } catch (err) {
    if (!(err instanceof BadValue)) throw err;
    const where = v !== null && typeof v === 'object' ? badPath(v, root, depth) : null;
    throw kitfoxError(err.code, `${where ?? root}: ${err.message}`);
  }
}

// The same into the shared encoder (shared.buf), returning the length.
export function encodeParamsShared(params) {
  enterShared(); // (no closure: a statement's hot path)
  try {
    const e = shared;
    e.reset();
    e.u8(TAG.list);
    e.varint(params.length);
    for (let i = 0; i < params.length; i++) encodeNamed(e, params[i], `parameter $${i + 1}`, 0);
    return e.pos;
  } finally {
    encoding = false;
  }
}

// Throws the KitfoxError encodeParams would for `values`, each named by
// rootOf(i) ("document 3"): for hosts that send values another way (the
// HTTP client's JSON), so that they refuse what the engine's API refuses.
export function checkValues(values, rootOf) {
  enterShared();
  try {
    shared.reset();
    for (let i = 0; i < values.length; i++) encodeNamed(shared, values[i], rootOf(i), 0);
  } finally {
    encoding = false;
  }
}

// A batch's [text, params] pairs (texts checked to be strings, params
// arrays), as encodeParams(pairs) encodes them: one list of two-item lists.
// A value it refuses is named by its entry and parameter ("batch entry 2:
// parameter $1.tags[3]: ..."). A view into the shared buffer, as encodeParams.
export function encodeBatch(pairs) {
  enterShared();
  try {
    const e = shared;
    e.reset();
    e.u8(TAG.list);
    e.varint(pairs.length);
    for (let i = 0; i < pairs.length; i++) {
      const [text, params] = pairs[i];
      e.u8(TAG.list);
      e.varint(2);
      encodeNamed(e, text, `batch entry ${i + 1}: the statement text`, 2);
      e.u8(TAG.list);
      e.varint(params.length);
      for (let j = 0; j < params.length; j++) encodeNamed(e, params[j], `batch entry ${i + 1}: parameter $${j + 1}`, 0);
    }
    return shared.bytes();
  } finally {
    encoding = false;
  }
}

// The shared encoder's first n bytes copied to heap[at..]: by hand when
// short (no view made), else with set().
export function copyShared(n, heap, at) {
  const b = shared.buf;
  if (n <= 64) for (let i = 0; i < n; i++) heap[at + i] = b[i];
  else heap.set(b.subarray(0, n), at);
}

// ---------------------------------------------------------------- decoding

// Node, Bun and Deno decode UTF-8 from a byte range fastest through
// Buffer's utf8Slice (about half TextDecoder's time on short text); the
// browsers use TextDecoder.
const utf8Slice = typeof globalThis.Buffer?.prototype?.utf8Slice === 'function' ? globalThis.Buffer.prototype.utf8Slice : null;

// The keys of the last object decoded, by their place in it: rows of one
// collection repeat the same keys, and a key seen before is compared byte
// by byte and given back as the same string (no decoding, and the object
// gets a key V8 already holds interned).
const KEY_SLOTS = 32;
const keyBytes = new Array(KEY_SLOTS).fill(null);
const keyText = new Array(KEY_SLOTS).fill('');

export class Decoder {
  constructor(u8, pos = 0) {
    this.u8 = u8;
    this._view = null;
    this.pos = pos;
  }

  // Made on the first float or f16 vector: most results hold neither.
  get view() {
    return (this._view ??= new DataView(this.u8.buffer, this.u8.byteOffset, this.u8.byteLength));
  }

  varint() {
    const b = this.u8;
    let x = 0;
    let mul = 1;
    const start = this.pos;
    for (;;) {
      const c = b[this.pos++];
      x += (c & 127) * mul;
      if (c < 128) return x;
      mul *= 128;
      if (mul >= 2 ** 49) break; // 7 bytes: 49 bits, exact in a double
    }
    // Longer than 7 bytes: exact with BigInt.
    this.pos = start;
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const c = b[this.pos++];
      v |= BigInt(c & 127) << shift;
      if (c < 128) return v;
      shift += 7n;
    }
  }

  int() {
    const z = this.varint();
    if (typeof z === 'number') return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    const v = (z >> 1n) ^ -(z & 1n);
    return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v;
  }

  text() {
    const n = this.varint();
    const b = this.u8;
    const start = this.pos;
    this.pos += n;
    if (n < 12) {
      let s = '';
      for (let i = start; i < start + n; i++) {
        const c = b[i];
        if (c > 127) return utf8(b, start, start + n);
        s += String.fromCharCode(c);
      }
      return s;
    }
    return utf8(b, start, start + n);
  }

  // An object's key at place `slot`: the string of the same bytes at that
  // place last time, else decoded (and remembered).
  key(slot) {
    if (slot >= KEY_SLOTS) return this.text();
    const n = this.varint();
    const b = this.u8;
    const start = this.pos;
    this.pos += n;
    const last = keyBytes[slot];
    if (last !== null && last.length === n) {
      let i = 0;
      while (i < n && last[i] === b[start + i]) i++;
      if (i === n) return keyText[slot];
    }
    const k = utf8(b, start, start + n);
    keyBytes[slot] = b.slice(start, start + n);
    keyText[slot] = k;
    return k;
  }

  value(tag = this.u8[this.pos++]) {
    switch (tag) {
      case TAG.null:
        return null;
      case TAG.false:
        return false;
      case TAG.true:
        return true;
      case TAG.int:
        return this.int();
      case TAG.float: {
        const d = this.view.getFloat64(this.pos, true);
        this.pos += 8;
        return d;
      }
      case TAG.text:
        return this.text();
      case TAG.bytes: {
        const n = this.varint();
        const out = this.u8.slice(this.pos, this.pos + n);
        this.pos += n;
        return out;
      }
      case TAG.timestamp:
        return new Date(Number(this.int()));
      case TAG.list: {
        const n = this.varint();
        const out = new Array(n);
        for (let i = 0; i < n; i++) out[i] = this.value();
        return out;
      }
      case TAG.object: {
        const n = this.varint();
        const out = {};
        for (let i = 0; i < n; i++) {
          const k = this.key(i);
          const v = this.value();
          if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
          else out[k] = v;
        }
        return out;
      }
      case TAG.f32: {
        const n = this.varint();
        const at = this.u8.byteOffset + this.pos;
        this.pos += n * 4;
        return new Float32Array(this.u8.buffer.slice(at, at + n * 4));
      }
      case TAG.f16: {
        const n = this.varint();
        const out = new Float32Array(n);
        for (let i = 0; i < n; i++) out[i] = halfToFloat(this.view.getUint16(this.pos + 2 * i, true));
        this.pos += n * 2;
        return out;
      }
      default:
        throw kitfoxError('corrupt', `unknown value tag ${tag} in a result`);
    }
  }
}

function utf8(b, start, end) {
  return utf8Slice !== null ? utf8Slice.call(b, start, end) : utf8Decoder.decode(b.subarray(start, end));
}

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

// Rows from the engine's output: varint count, then one object value each.
export function decodeRows(u8) {
  return rowsOf(new Decoder(u8));
}

// The same, read in place at `pos` of `heap` (the module's memory) by one
// decoder kept for it: a point read makes no view and no decoder.
const heapDecoder = new Decoder(new Uint8Array(0));
export function decodeRowsAt(heap, pos) {
  const d = heapDecoder;
  if (d.u8 !== heap) {
    d.u8 = heap;
    d._view = null;
  }
  d.pos = pos;
  return rowsOf(d);
}

function rowsOf(d) {
  const n = d.varint();
  const rows = new Array(n);
  for (let i = 0; i < n; i++) rows[i] = d.value();
  return rows;
}

// A batch's results: varint result count, then each as decodeRows reads one.
export function decodeBatch(u8) {
  const d = new Decoder(u8);
  const n = d.varint();
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    const m = d.varint();
    const rows = new Array(m);
    for (let j = 0; j < m; j++) rows[j] = d.value();
    out[i] = rows;
  }
  return out;
}
