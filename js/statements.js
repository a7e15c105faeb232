// Statement text built in JS from a call's arguments, shared by the embedded
// API (js/kitfox.js) and the HTTP client (js/http.js): names checked against
// the identifier grammar, and near()'s statement.
import { kitfoxError } from './errors.js';

export const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

export function checkName(what, s, re) {
  if (typeof s !== 'string' || !re.test(s)) throw kitfoxError('invalid', `${what} must be a name, got ${JSON.stringify(s)}`);
  return s;
}

export function checkCount(what, n) {
  if (!Number.isInteger(n) || n < 0)
    throw kitfoxError('invalid', `${what} must be a non-negative integer, got ${typeof n === 'string' ? JSON.stringify(n) : String(n)}`);
  return n;
}

const NEAR_OPTIONS = ['limit', 'ef', 'exact', 'where', 'params', 'select'];

// Nearest neighbours of `vector` in `collection`.`field`:
//   get C [select ...] [where ...] near field $k [ef N] [exact] limit K
// with the vector as the last param. Returns { text, params }.
export function nearStatement(collection, field, vector, options = {}) {
  if (options === null || typeof options !== 'object') throw kitfoxError('invalid', 'near options must be an object');
  for (const key of Object.keys(options))
    if (!NEAR_OPTIONS.includes(key)) throw kitfoxError('invalid', `unknown near option '${key}' (near takes ${NEAR_OPTIONS.join(', ')})`);
  const { limit = 10, ef, exact = false, where, params = [], select } = options;
  if (typeof exact !== 'boolean') throw kitfoxError('invalid', `exact must be true or false, got ${typeof exact === 'string' ? JSON.stringify(exact) : String(exact)}`);
  checkName('collection', collection, IDENT);
  checkName('field', field, PATH);
  if (!Array.isArray(params)) throw kitfoxError('invalid', 'params must be an array');
  let v = vector;
  if (Array.isArray(v)) {
    v = Float32Array.from(v);
    // (a finite number past float32's range would read as an infinity)
    const far = v.findIndex((x, i) => !Number.isFinite(x) && Number.isFinite(vector[i]));
    if (far >= 0) throw kitfoxError('type', `near's vector[${far}]: ${vector[far]} is beyond a float32's range (±3.4e38)`);
  }
  if (!(v instanceof Float32Array || v instanceof Float64Array))
    throw kitfoxError('type', 'near takes the vector as a Float32Array or an array of numbers');
  const all = [...params, v];
  let q = `get ${collection}`;
  if (select !== undefined) {
    const list = Array.isArray(select) ? select : [select];
    q += ` select ${list.map((s) => checkName('select', s, PATH)).join(', ')}`;
  }
  if (where !== undefined && where !== null && where !== '') {
    if (typeof where !== 'string') throw kitfoxError('invalid', 'where must be a string');
    q += ` where ${where}`;
  }
  // On a line of its own: a comment that ends `where` (-- ...) ends there.
  q += `\nnear ${field} $${all.length}`;
  if (ef !== undefined) q += ` ef ${checkCount('ef', ef)}`;
  if (exact) q += ' exact';
  q += ` limit ${checkCount('limit', limit)}`;
  return { text: q, params: all };
}
