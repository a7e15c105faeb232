// What a statement does, from its first words (docs/query-language.md), for
// kitfox/worker's sharing of one database among tabs (js/worker.js,
// js/worker-main.js): whether a call may be sent again after the tab serving
// it went away (reads may, writes may not: they may have landed), which
// collection a write changes (the `change` event), and where transactions
// begin and end (a transaction belongs to the tab that began it).
//
//   classify('put notes {title: "a"}')   -> { kind: 'write', collection: 'notes' }
//   classify('get notes where id = 1')   -> { kind: 'read', collection: null }
//
// Kinds: 'read' (get, explain, collections, describe), 'write' (put, insert,
// set, del; create/drop/alter of a collection or an index), 'begin',
// 'commit', 'rollback', 'maintenance' (checkpoint, compact: they change no
// document), 'unknown' (anything else: the engine refuses it, and it is
// treated as a write). Only the first words are looked at; the engine
// checks the rest.

const WORD = /[A-Za-z_][A-Za-z0-9_]*/y;

// Up to `max` leading words, skipping white space and `--` comments; stops
// at the first character that starts no word.
function words(text, max) {
  const out = [];
  const n = text.length;
  let i = 0;
  while (out.length < max && i < n) {
    const c = text.charCodeAt(i);
    if (c === 32 || (c >= 9 && c <= 13)) {
      i++;
      continue;
    }
    if (c === 45 && text.charCodeAt(i + 1) === 45) {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? n : eol + 1;
      continue;
    }
    WORD.lastIndex = i;
    const m = WORD.exec(text);
    if (!m) break;
    out.push(m[0]);
    i += m[0].length;
  }
  return out;
}

const READ = Object.freeze({ kind: 'read', collection: null });
const UNKNOWN = Object.freeze({ kind: 'unknown', collection: null });
const MAINTENANCE = Object.freeze({ kind: 'maintenance', collection: null });
const BEGIN = Object.freeze({ kind: 'begin', collection: null });
const COMMIT = Object.freeze({ kind: 'commit', collection: null });
const ROLLBACK = Object.freeze({ kind: 'rollback', collection: null });

const write = (collection) => ({ kind: 'write', collection: collection ?? null });

export function classify(text) {
  if (typeof text !== 'string') return UNKNOWN;
  const w = words(text, 7);
  const k = (i) => (w[i] === undefined ? '' : w[i].toLowerCase());
  switch (k(0)) {
    case 'get':
    case 'explain':
    case 'collections':
    case 'describe':
      return READ;
    case 'put':
    case 'insert':
    case 'set':
    case 'del':
      return write(w[1]);
    case 'create':
    case 'drop': {
      // create collection [if not exists] C / drop collection [if exists] C
      // create index [if not exists] on C (...) / drop index [if exists] on C (...)
      let i = 2;
      if (k(2) === 'if') i = k(0) === 'create' ? 5 : 4;
      if (k(1) === 'collection') return write(w[i]);
      if (k(1) === 'index') return write(k(i) === 'on' ? w[i + 1] : null);
      return write(null);
    }
    case 'alter':
      return write(k(1) === 'collection' ? w[2] : null);
    case 'begin':
      return BEGIN;
    case 'commit':
      return COMMIT;
    case 'rollback':
      return ROLLBACK;
    case 'checkpoint':
    case 'compact':
      return MAINTENANCE;
    default:
      return UNKNOWN;
  }
}

// True when running the statement again cannot apply anything twice.
export function retrySafe(kind) {
  return kind === 'read' || kind === 'maintenance';
}
