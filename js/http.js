// kitfox/http: a client of `kitfox serve` over fetch, for Node, browsers,
// workers and edge runtimes alike. The methods are those of the embedded
// database (query, batch, near, prepare), as promises.
//
//   import { connect } from 'kitfox/http';
//   const db = await connect('http://127.0.0.1:7700', { token: process.env.KITFOX_TOKEN });
//   await db.query('put notes {title: $1}', ['hello']);
//   const rows = await db.near('notes', 'embed', new Float32Array([1, 0, 0]), { limit: 5 });
//
// Values travel as JSON (docs/server.md): vectors go as arrays of numbers
// and come back as arrays; timestamps come back as ISO-8601 text and bytes
// as base64 text.
import { checkValues, encodeBatch } from './codec.js';
import { KitfoxError, kitfoxError } from './errors.js';
import { IDENT, checkName, nearStatement } from './statements.js';

export { KitfoxError };

// Values as JSON text. What the embedded API refuses is refused first, by
// its own encoder (codec.js checkValues, encodeBatch), with its messages;
// what JSON cannot carry (NaN, the infinities, which the engine may
// compare with) is refused here. The rest goes unchanged: a Float32Array
// or Float64Array (a vector) as an array of numbers; a Uint8Array or an
// ArrayBuffer as base64 text (what the engine reads into a bytes field); a
// Date as ISO-8601 text; an integer beyond 2^53, a number or a BigInt, as
// its exact digits (JSON.stringify would write 2 ** 60 as
// 1152921504606847000, another integer).
const TWO63 = 2 ** 63;

class NoJSON extends Error {}

function numberText(v) {
  if (!Number.isFinite(v)) throw new NoJSON(`${v} cannot travel as JSON`);
  if (Number.isSafeInteger(v)) return String(v);
  if (Number.isInteger(v)) return v < TWO63 && v >= -TWO63 ? BigInt(v).toString() : v.toExponential(); // a float past int64, as the embedded API stores it
  return String(v);
}

function base64(u8) {
  let bin = '';
  for (let i = 0; i < u8.length; i += 0x8000) bin += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  return btoa(bin);
}

// `v`, which the encoder took, as JSON; `path` follows it for NoJSON.
function write(v, out, path) {
  switch (typeof v) {
    case 'number':
      return void out.push(numberText(v));
    case 'bigint':
      return void out.push(v.toString());
    case 'object':
      break;
    default: // strings, booleans; undefined as null
      return void out.push(v === undefined ? 'null' : JSON.stringify(v));
  }
  if (v === null) return void out.push('null');
  if (Array.isArray(v) || v instanceof Float32Array || v instanceof Float64Array) {
    out.push('[');
    for (let i = 0; i < v.length; i++) {
      if (i) out.push(',');
      path.push(`[${i}]`);
      write(v[i], out, path);
      path.pop();
    }
    out.push(']');
  } else if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
    out.push(`"${base64(v instanceof ArrayBuffer ? new Uint8Array(v) : v)}"`);
  } else if (v instanceof Date) {
    out.push(`"${v.toISOString()}"`);
  } else {
    out.push('{');
    let first = true;
    for (const k of Object.keys(v)) {
      if (!first) out.push(',');
      first = false;
      path.push(`.${k}`);
      out.push(JSON.stringify(k), ':');
      write(v[k], out, path);
      path.pop();
    }
    out.push('}');
  }
}

// Values (checked by the encoder) as a JSON array; rootOf(i) names one in
// an error ("parameter $2.tags[1]: NaN cannot travel as JSON").
function listJSON(values, rootOf) {
  const out = ['['];
  const path = [];
  for (let i = 0; i < values.length; i++) {
    if (i) out.push(',');
    try {
      write(values[i], out, path);
    } catch (e) {
      if (!(e instanceof NoJSON)) throw e;
      throw kitfoxError('type', `${rootOf(i)}${path.join('')}: ${e.message}`);
    }
  }
  out.push(']');
  return out.join('');
}

const paramRoot = (i) => `parameter $${i + 1}`;

// An answer's JSON, as JSON.parse reads it but for an integer beyond 2^53,
// which comes back as a BigInt with every digit, as the embedded API gives
// it (JSON.parse gives the nearest double: 2 ** 60 + 1 as 2 ** 60). The
// text is parsed by JSON.parse unless an integer of 16 digits or more lies
// outside its strings; then by parseExact, slower but exact. A float, which
// the server writes with a point or an exponent, stays a number. Strings
// are skipped by indexOf, not by a regular expression, whose backtracking
// overflows the stack on a string of some megabytes.
function parseAnswer(text) {
  return /\d{16}/.test(text) && hasLongInt(text) ? parseExact(text) : JSON.parse(text);
}

// The index of the quote that ends the string whose opening quote is at i,
// or -1.
function stringEnd(text, i) {
  for (let j = i + 1; ; j++) {
    j = text.indexOf('"', j);
    if (j < 0) return -1;
    let k = j - 1;
    while (text.charCodeAt(k) === 92) k--; // backslashes before it: escaped when odd
    if ((j - 1 - k) % 2 === 0) return j;
  }
}

const isDigit = (c) => c >= 48 && c <= 57;

function hasLongInt(text) {
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const j = stringEnd(text, i);
      if (j < 0) return false;
      i = j + 1;
    } else if (isDigit(c)) {
      let j = i + 1;
      while (isDigit(text.charCodeAt(j))) j++;
      const after = text.charCodeAt(j);
      // (not a fraction's digits, nor a float's: 1.5, 12345678901234567.0, 1e5)
      if (j - i >= 16 && text.charCodeAt(i - 1) !== 46 && after !== 46 && after !== 101 && after !== 69) return true;
      i = j;
    } else {
      i++;
    }
  }
  return false;
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const SPACE = /[ \t\n\r]*/y;

function parseExact(text) {
  let i = 0;
  const fail = () => {
    throw new SyntaxError(`bad JSON at ${i}`);
  };
  const space = () => {
    SPACE.lastIndex = i;
    SPACE.exec(text);
    i = SPACE.lastIndex;
  };
  const take = (c) => {
    space();
    if (text[i] !== c) fail();
    i++;
  };
  const string = () => {
    if (text[i] !== '"') fail();
    const j = stringEnd(text, i);
    if (j < 0) fail();
    const s = JSON.parse(text.slice(i, j + 1)); // (which refuses bad escapes and control characters)
    i = j + 1;
    return s;
  };
  const value = () => {
    space();
    const c = text[i];
    if (c === '"') return string();
    if (c === '[') {
      i++;
      const a = [];
      space();
      if (text[i] === ']') return i++, a;
      for (;;) {
        a.push(value());
        space();
        if (text[i] === ']') return i++, a;
        take(',');
      }
    }
    if (c === '{') {
      i++;
      const o = {};
      space();
      if (text[i] === '}') return i++, o;
      for (;;) {
        space();
        const k = string();
        take(':');
        // As JSON.parse, "__proto__" is a key like any other.
        Object.defineProperty(o, k, { value: value(), enumerable: true, writable: true, configurable: true });
        space();
        if (text[i] === '}') return i++, o;
        take(',');
      }
    }
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) if (text.startsWith(word, i)) return (i += word.length), v;
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail();
    i = NUMBER.lastIndex;
    const n = Number(m[0]);
    return m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  };
  const v = value();
  space();
  if (i !== text.length) fail();
  return v;
}

// Parameters as a JSON array.
function paramsJSON(params) {
  const p = checkParams(params);
  checkValues(p, paramRoot);
  return listJSON(p, paramRoot);
}

// The message as the engine words it: "syntax error at 12: expected ...".
function errorFrom(body, status) {
  const e = body && typeof body === 'object' ? body.error : null;
  if (!e || typeof e.code !== 'string') return kitfoxError('io', `the server answered ${status} without a kitfox error`);
  const pos = Number.isInteger(e.position) ? e.position : -1;
  return new KitfoxError(e.code, `${e.code} error${pos >= 0 ? ` at ${pos}` : ''}: ${e.message}`, pos);
}

function checkParams(params) {
  if (params === undefined || params === null) return [];
  if (!Array.isArray(params)) throw kitfoxError('invalid', 'params must be an array');
  return params;
}

// A statement checked once by the server (kitfox/http's prepare): the server
// keeps its text parsed, so each query(params) costs what a prepared
// statement does there.
export class HttpStatement {
  constructor(client, text, write) {
    this._client = client;
    this.text = text;
    this.isWrite = write;
  }

  query(params) {
    return this._client.query(this.text, params);
  }

  queryJSON(params) {
    return this._client.queryJSON(this.text, params);
  }

  finalize() {}
}

export class KitfoxClient {
  constructor(url, options = {}) {
    if (typeof url !== 'string' && !(url instanceof URL)) throw kitfoxError('invalid', 'connect needs the URL of a kitfox server');
    this.url = String(url).replace(/\/+$/, '');
    const { token, fetch: f = globalThis.fetch } = options;
    if (typeof f !== 'function') throw kitfoxError('invalid', 'no fetch here: give one as the fetch option');
    // Called as a plain function: a browser's or a Worker's fetch refuses to
    // run as a method of another object ("Illegal invocation").
    this._fetch = (input, init) => f(input, init);
    if (token !== undefined && token !== null && (typeof token !== 'string' || !/^[\x21-\x7e]*$/.test(token)))
      throw kitfoxError('invalid', 'the token must be text of printable ASCII characters without spaces (it travels in an HTTP header)');
    this._headers = token ? { authorization: `Bearer ${token}` } : {};
  }

  async _send(method, path, body, contentType = 'application/json', accept = 'application/json') {
    const headers = { ...this._headers, accept };
    if (body !== undefined) headers['content-type'] = contentType;
    let res, text;
    try {
      res = await this._fetch(`${this.url}${path}`, { method, headers, body });
      text = await res.text(); // the connection may fail while the answer comes
    } catch (e) {
      throw kitfoxError('io', `${method} ${this.url}${path} failed: ${e?.cause?.message ?? e?.message ?? e}`);
    }
    if (!res.ok) {
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {}
      throw errorFrom(parsed, res.status);
    }
    return text;
  }

  // The answer's JSON object, or its member `key` (an array), when `shape`
  // (if given) holds of it: an answer otherwise is no kitfox server's.
  async _json(method, path, body, key, shape) {
    const text = await this._send(method, path, body);
    let r;
    try {
      r = parseAnswer(text);
    } catch (e) {
      // Text that is no JSON is no kitfox server's answer; anything else
      // (memory, the stack) is this client's failure, and says so.
      if (!(e instanceof SyntaxError)) throw kitfoxError('io', `${method} ${this.url}${path}: the answer (${text.length} characters) could not be read: ${e.message}`);
    }
    const got = r !== null && typeof r === 'object' && key !== undefined ? r[key] : r;
    const ok = got !== null && typeof got === 'object' && (key === undefined || Array.isArray(got)) && (!shape || shape(got));
    if (!ok) throw kitfoxError('io', `${method} ${this.url}${path}: the answer is not a kitfox server's (${key ? `no "${key}" in ` : ''}${JSON.stringify(text.slice(0, 80))})`);
    return got;
  }

  // Runs one statement; resolves to its rows.
  async query(text, params) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    return this._json('POST', '/query', `{"query":${JSON.stringify(text)},"params":${paramsJSON(params)}}`, 'rows');
  }

  // Runs one statement; resolves to each row's JSON text as the server wrote
  // it (kitfox::to_json, as the native CLI prints). `params` may be an array
  // or JSON text.
  async queryJSON(text, params) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const p = typeof params === 'string' ? params : paramsJSON(params);
    const body = `{"query":${JSON.stringify(text)},"params":${p}}`;
    const out = await this._send('POST', '/query', body, 'application/json', 'application/x-ndjson');
    return out === '' ? [] : out.replace(/\n$/, '').split('\n');
  }

  // Runs statements atomically, as the embedded batch(): [text, params]
  // pairs (or texts); resolves to one array of rows per statement.
  async batch(statements) {
    if (!Array.isArray(statements)) throw kitfoxError('invalid', 'batch takes an array of [text, params] pairs');
    const items = Array.from(statements, (s, i) => {  // holes too: an entry each
      const [text, params = []] = Array.isArray(s) ? s : [s];
      if (typeof text !== 'string') throw kitfoxError('invalid', `batch entry ${i + 1}: a statement must be a string`);
      if (!Array.isArray(params)) throw kitfoxError('invalid', `batch entry ${i + 1}: params must be an array`);
      return [text, params];
    });
    encodeBatch(items); // what Kitfox#batch refuses, refused the same way
    const body = items.map(([text, params], i) => `{"query":${JSON.stringify(text)},"params":${listJSON(params, (j) => `batch entry ${i + 1}: parameter $${j + 1}`)}}`);
    const results = await this._json('POST', '/batch', `[${body.join(',')}]`, 'results', (r) => r.every((x) => Array.isArray(x?.rows)));
    return results.map((x) => x.rows);
  }

  // Nearest neighbours, as the embedded near().
  async near(collection, field, vector, options = {}) {
    const { text, params } = nearStatement(collection, field, vector, options);
    return this.query(text, params);
  }

  // Puts documents (an array of objects) in one atomic write; resolves to
  // their ids. Sent as one JSON array to POST /docs/COLLECTION.
  async put(collection, docs) {
    checkName('collection', collection, IDENT);
    if (!Array.isArray(docs)) throw kitfoxError('invalid', 'put takes an array of documents');
    const docRoot = (i) => `document ${i + 1}`;
    checkValues(docs, docRoot);
    return this._json('POST', `/docs/${collection}`, listJSON(docs, docRoot), 'ids');
  }

  // Checks a statement on the server as the embedded prepare() does (it
  // parses and binds it); resolves to a statement to run with parameters.
  async prepare(text) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const r = await this._json('POST', '/prepare', JSON.stringify({ query: text }), undefined, (x) => typeof x.write === 'boolean');
    return new HttpStatement(this, text, r.write);
  }

  // The server's database stats, named as the embedded stats() names them
  // (fileBytes, imageBytes, ..., collections: [{name, documents, bytes}]),
  // and the server's own (server: {ranOnLoop, ranHandedOver}).
  async stats() {
    const camel = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]));
    const s = camel(await this._json('GET', '/stats', undefined, undefined, (x) => Array.isArray(x.collections)));
    s.collections = s.collections.map(camel);
    if (s.server) s.server = camel(s.server);
    return s;
  }

  async health() {
    return this._json('GET', '/health');
  }

  // Nothing to release: fetch keeps and closes its connections itself.
  close() {}
}

// Connects to a kitfox server: resolves once it answers GET /health.
export async function connect(url, options = {}) {
  const client = new KitfoxClient(url, options);
  await client.health();
  return client;
}
export default connect;
