// A kitfox database in a Cloudflare Durable Object: each database name in
// the URL is one Durable Object, whose storage keeps the database file
// (src/storage-host.js), so it survives requests, evictions and restarts.
//
//   POST /db/NAME/query   {"q": "get notes where year > $1", "params": [2020]}
//                         -> {"rows": [...]}, or 400 {"error": {code, message, position}}
//   POST /db/NAME/batch   {"statements": [["put notes {title: $1}", ["a"]], ...]}
//   POST /db/NAME/near    {"collection", "field", "vector": [..], "limit", "where", "params"}
//   GET  /db/NAME/export  the database file's bytes (the native CLI opens them)
//   GET  /db/NAME/stats
//
// Vectors come back as arrays of numbers, bytes as arrays, big integers as
// strings, dates as ISO text.
import { DurableObject } from 'cloudflare:workers';
import { Kitfox, KitfoxError } from 'kitfox';

import { StorageHost } from './storage-host.js';

function toJSON(value) {
  return JSON.stringify(value, (key, v) => {
    if (typeof v === 'bigint') return String(v);
    if (ArrayBuffer.isView(v)) return Array.from(v);
    return v;
  });
}

function answer(value, status = 200) {
  return new Response(toJSON(value), { status, headers: { 'content-type': 'application/json' } });
}

function failure(e) {
  if (e instanceof KitfoxError) return answer({ error: { code: e.code, message: e.message, position: e.position } }, e.code === 'failed' ? 500 : 400);
  return answer({ error: { code: 'failed', message: String(e && e.message ? e.message : e), position: -1 } }, 500);
}

// A request's mistake: 400, nothing run.
class BadRequest extends Error {}
const refuse = (message) => answer({ error: { code: 'invalid', message, position: -1 } }, 400);

// The body's JSON, with an integer beyond 2^53 kept exact as a BigInt, as
// the embedded API takes it (JSON.parse alone would round it).
function readBody(text) {
  try {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value !== 'number' || Number.isSafeInteger(value) || !Number.isInteger(value)) return value;
      const source = context?.source;
      if (source === undefined) throw new BadRequest(`the integer near ${value} cannot be read exactly here: write it in the statement`);
      return /^-?\d+$/.test(source) ? BigInt(source) : value;
    });
  } catch (e) {
    throw e instanceof BadRequest ? e : new BadRequest(`the body is not JSON: ${e.message}`);
  }
}

// A transaction is a connection's, and this one connection serves every
// client: a client's begin would take in every other client's writes,
// which its rollback (or an eviction) would drop. Refused, as kitfox serve
// refuses it; a batch is atomic.
const TRANSACTION = /^(?:\s|--[^\n]*(?:\n|$))*(?:begin|commit|rollback)\b/i;
function noTransaction(text) {
  if (typeof text === 'string' && TRANSACTION.test(text))
    throw new BadRequest('transactions are not taken here: every client shares one connection (send the writes as one batch)');
}

export class KitfoxDatabase extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.opening = null;
  }

  // The database, opened on the first request this instance serves (the
  // engine reads the file from storage then); later requests reuse it.
  database() {
    if (!this.opening) {
      this.opening = Kitfox.open('db.kfdb', { host: new StorageHost(this.ctx.storage), sync: 'always' });
      this.opening.catch(() => (this.opening = null));
    }
    return this.opening;
  }

  async fetch(request) {
    const op = new URL(request.url).pathname.split('/').pop();
    try {
      const db = await this.database();
      const body = request.method === 'POST' ? readBody(await request.text()) : {};
      switch (op) {
        case 'query':
          noTransaction(body.q);
          return answer({ rows: db.query(body.q, body.params ?? []) });
        case 'batch':
          if (Array.isArray(body.statements)) for (const s of body.statements) noTransaction(Array.isArray(s) ? s[0] : s);
          return answer({ results: db.batch(body.statements) });
        case 'near': {
          const { collection, field, vector, ...options } = body;
          // A vector's numbers are floats: an integer past 2^53 (read as a
          // BigInt above) is one too.
          const v = Array.isArray(vector) ? vector.map((x) => (typeof x === 'bigint' ? Number(x) : x)) : vector;
          return answer({ rows: db.near(collection, field, v, options) });
        }
        case 'export':
          return new Response(db.export(), { headers: { 'content-type': 'application/octet-stream' } });
        case 'stats':
          return answer(db.stats());
        default:
          return answer({ error: { code: 'not_found', message: `no such operation: ${op}`, position: -1 } }, 404);
      }
    } catch (e) {
      if (e instanceof BadRequest) return refuse(e.message);
      // A module that failed (out of memory) is given up with every database
      // in it: the next request opens the database again, in a new one.
      if (e instanceof KitfoxError && e.code === 'failed') this.opening = null;
      return failure(e);
    }
  }
}

export default {
  async fetch(request, env) {
    const m = /^\/db\/([A-Za-z0-9_-]{1,64})\/[a-z]+$/.exec(new URL(request.url).pathname);
    if (!m) return new Response('POST /db/NAME/query {"q": "...", "params": [...]}\n', { status: 404 });
    return env.KITFOX.get(env.KITFOX.idFromName(m[1])).fetch(request);
  },
};
