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
import { KitfoxError, kitfoxError } from './errors.js';
import { IDENT, checkName, nearStatement } from './statements.js';

export { KitfoxError };

// Values as JSON text, refused where the embedded API refuses them (and
// where JSON cannot carry them), never changed on the way: a Float32Array
// or Float64Array (a vector) as an array of numbers; a Uint8Array or an
// ArrayBuffer as base64 text (what the engine reads into a bytes field); a
// Date as ISO-8601 text; an integer beyond 2^53, a number or a BigInt, as
// its exact digits (JSON.stringify would write 2 ** 60 as
// 1152921504606847000, another integer). `where` names the value in
// errors ("$1", "document 2").
const MAX_DEPTH = 64;
const TWO63 = 2 ** 63;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const LONE_SURROGATE = /\p{Cs}/u;

class BadValue extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function numberText(v) {
  if (!Number.isFinite(v)) throw new BadValue('type', `${v} is not a finite number`);
  if (Number.isSafeInteger(v)) return String(v);
  if (Number.isInteger(v)) return v < TWO63 && v >= -TWO63 ? BigInt(v).toString() : v.toExponential(); // a float past int64, as the embedded API stores it
  return String(v);
}

function base64(u8) {
  let bin = '';
  for (let i = 0; i < u8.length; i += 0x8000) bin += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  return btoa(bin);
}

function write(v, out, path, depth) {
  switch (typeof v) {
    case 'string':
      if (LONE_SURROGATE.test(v)) throw new BadValue('type', 'a string with an unpaired UTF-16 surrogate cannot be stored');
      out.push(JSON.stringify(v));
      return;
    case 'number':
      out.push(numberText(v));
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'bigint':
      if (v < INT64_MIN || v > INT64_MAX) throw new BadValue('type', `${v} is out of the 64-bit integer range`);
      out.push(v.toString());
      return;
    case 'undefined':
      out.push('null');
      return;
    case 'object':
      break;
    default:
      throw new BadValue('type', `a ${typeof v} cannot be stored`);
  }
  if (v === null) return void out.push('null');
  if (depth > MAX_DEPTH) throw new BadValue('limit', `nested deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(v) || v instanceof Float32Array || v instanceof Float64Array) {
    out.push('[');
    for (let i = 0; i < v.length; i++) {
      if (i) out.push(',');
      path.push(`[${i}]`);
      write(v[i], out, path, depth + 1);
      path.pop();
    }
    out.push(']');
  } else if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
    out.push(`"${base64(v instanceof ArrayBuffer ? new Uint8Array(v) : v)}"`);
  } else if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) throw new BadValue('type', 'an invalid Date');
    out.push(`"${v.toISOString()}"`);
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      const what = proto?.constructor?.name || 'object of a class';
      throw new BadValue('type', `a ${what} cannot be stored (use a plain object, an Array, a Float32Array, a Uint8Array or a Date)`);
    }
    out.push('{');
    let first = true;
    for (const k of Object.keys(v)) {
      if (!first) out.push(',');
      first = false;
      path.push(`.${k}`);
      write(k, out, path, depth + 1);
      out.push(':');
      write(v[k], out, path, depth + 1);
      path.pop();
    }
    out.push('}');
  }
}

// One value as JSON text; `where` names it in an error ("parameter $2.tags[1]: ...").
function valueJSON(v, where) {
  const out = [];
  const path = [];
  try {
    write(v, out, path, 1);
  } catch (e) {
    if (!(e instanceof BadValue)) throw e;
    throw kitfoxError(e.code, `${where}${path.join('')}: ${e.message}`);
  }
  return out.join('');
}

// Parameters as a JSON array, each named by its number in errors.
function paramsJSON(params, prefix = '') {
  return `[${checkParams(params).map((p, i) => valueJSON(p, `${prefix}parameter $${i + 1}`)).join(',')}]`;
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

  // The answer's JSON object, and its member `key` when given: an answer
  // without it is no kitfox server's.
  async _json(method, path, body, key) {
    const text = await this._send(method, path, body);
    let r;
    try {
      r = JSON.parse(text);
    } catch {}
    const ok = r !== null && typeof r === 'object' && (key === undefined || Array.isArray(r[key]));
    if (!ok) throw kitfoxError('io', `${method} ${this.url}${path}: the answer is not a kitfox server's (${key ? `no "${key}" in ` : ''}${JSON.stringify(text.slice(0, 80))})`);
    return key === undefined ? r : r[key];
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
    const items = statements.map((s, i) => {
      const [text, params = []] = Array.isArray(s) ? s : [s];
      if (typeof text !== 'string') throw kitfoxError('invalid', `batch entry ${i + 1}: a statement must be a string`);
      if (!Array.isArray(params)) throw kitfoxError('invalid', `batch entry ${i + 1}: params must be an array`);
      return `{"query":${JSON.stringify(text)},"params":${paramsJSON(params, `batch entry ${i + 1}: `)}}`;
    });
    const results = await this._json('POST', '/batch', `[${items.join(',')}]`, 'results');
    return results.map((x) => x?.rows);
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
    return this._json('POST', `/docs/${collection}`, `[${docs.map((d, i) => valueJSON(d, `document ${i + 1}`)).join(',')}]`, 'ids');
  }

  // Checks a statement on the server as the embedded prepare() does (it
  // parses and binds it); resolves to a statement to run with parameters.
  async prepare(text) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const r = await this._json('POST', '/prepare', JSON.stringify({ query: text }));
    return new HttpStatement(this, text, r.write);
  }

  // The server's database stats, named as the embedded stats() names them
  // (fileBytes, imageBytes, ..., collections: [{name, documents, bytes}]),
  // and the server's own (server: {ranOnLoop, ranHandedOver}).
  async stats() {
    const camel = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]));
    const s = camel(await this._json('GET', '/stats'));
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
