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

// Typed arrays (vectors) as arrays of numbers; a BigInt as a number when it
// fits a double exactly.
function replacer(key, v) {
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v);
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
      throw kitfoxError('invalid', `the integer ${v} does not travel as JSON without losing digits`);
    return Number(v);
  }
  return v;
}

function json(value) {
  return JSON.stringify(value, replacer);
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
    this._fetch = f;
    this._headers = token ? { authorization: `Bearer ${token}` } : {};
  }

  async _send(method, path, body, contentType = 'application/json', accept = 'application/json') {
    const headers = { ...this._headers, accept };
    if (body !== undefined) headers['content-type'] = contentType;
    let res;
    try {
      res = await this._fetch(`${this.url}${path}`, { method, headers, body });
    } catch (e) {
      throw kitfoxError('io', `${method} ${this.url}${path} failed: ${e?.cause?.message ?? e?.message ?? e}`);
    }
    const text = await res.text();
    if (!res.ok) {
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {}
      throw errorFrom(parsed, res.status);
    }
    return text;
  }

  async _json(method, path, body, contentType) {
    return JSON.parse(await this._send(method, path, body, contentType));
  }

  // Runs one statement; resolves to its rows.
  async query(text, params) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const r = await this._json('POST', '/query', json({ query: text, params: checkParams(params) }));
    return r.rows;
  }

  // Runs one statement; resolves to each row's JSON text as the server wrote
  // it (kitfox::to_json, as the native CLI prints). `params` may be an array
  // or JSON text.
  async queryJSON(text, params) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const p = typeof params === 'string' ? params : json(checkParams(params));
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
      return { query: text, params };
    });
    const r = await this._json('POST', '/batch', json(items));
    return r.results.map((x) => x.rows);
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
    const r = await this._json('POST', `/docs/${collection}`, json(docs));
    return r.ids;
  }

  // Checks a statement on the server as the embedded prepare() does (it
  // parses and binds it); resolves to a statement to run with parameters.
  async prepare(text) {
    if (typeof text !== 'string') throw kitfoxError('invalid', 'a statement must be a string');
    const r = await this._json('POST', '/prepare', json({ query: text }));
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
