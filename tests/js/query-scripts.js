// Runs a tests/queries/*.test script against a backend, with the semantics
// of tests/query_runner.cpp (the native runner): the same files, the same
// answers. Rows are compared as the native to_json text (queryJSON), and
// params as JSON text parsed by the engine itself.
//
// A backend: { open(path) -> a connection with queryJSON(text, paramsJSON),
// prepare(text) -> { queryJSON(paramsJSON) } and close() }, each of which
// may return a promise. queries.test.js runs the WASM build, server-queries
// .test.js the native server through kitfox/http.
import fs from 'node:fs';
import path from 'node:path';

import { root } from './helpers.js';

export const scriptDir = path.join(root, 'tests', 'queries');
export const scripts = fs.readdirSync(scriptDir).filter((f) => f.endsWith('.test')).sort();

export async function runScript(file, backend, work) {
  const lines = fs.readFileSync(path.join(scriptDir, file), 'utf8').split('\n').map((l) => l.replace(/\r$/, ''));
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const dbPath = path.join(work, file.replace(/\.test$/, '.kfdb'));
  let db = await backend.open(dbPath);
  let params = undefined;
  let prepared = new Map();
  let passed = 0;
  const failures = [];
  const fail = (line, msg) => failures.push(`${file}:${line + 1}: ${msg}`);
  let i = 0;
  try {
    while (i < lines.length) {
      const head = lines[i];
      if (head === '' || head.startsWith('#')) {
        i++;
        continue;
      }
      const headLine = i++;
      if (head === 'reopen') {
        prepared = new Map();
        await db.close();
        db = await backend.open(dbPath);
        passed++;
        continue;
      }
      if (head.startsWith('params ')) {
        const text = head.slice(7);
        let ok = false;
        try {
          ok = Array.isArray(JSON.parse(text));
        } catch {}
        if (!ok) fail(headLine, 'params must be a JSON array');
        else params = text;
        continue;
      }
      const stmt = [];
      while (i < lines.length && lines[i] !== '' && lines[i] !== '----') stmt.push(lines[i++]);
      const text = stmt.join('\n');
      let expected = [];
      let hasExpected = false;
      if (i < lines.length && lines[i] === '----') {
        hasExpected = true;
        i++;
        while (i < lines.length && lines[i] !== '') expected.push(lines[i++]);
      }
      if (head.startsWith('prepare ')) {
        const name = head.slice(8);
        let st = null;
        let err = null;
        try {
          st = await db.prepare(text);
        } catch (e) {
          if (e.name !== 'KitfoxError') throw e;
          err = e;
        }
        if (name === 'error') {
          const want = expected.join('\n');
          if (!err) fail(headLine, `expected prepare to fail\n  in: ${text}`);
          else if (hasExpected && !err.message.includes(want))
            fail(headLine, `error text differs\n  want (substring): ${want}\n  got: ${err.message}`);
          else passed++;
        } else if (err) {
          fail(headLine, `prepare failed: ${err.message}\n  in: ${text}`);
        } else {
          prepared.set(name, st);
          passed++;
        }
        continue;
      }
      let rows = null;
      let error = null;
      try {
        if (text.length > 1 && text[0] === '@') {
          const st = prepared.get(text.slice(1));
          if (!st) {
            fail(headLine, `no statement prepared as '${text.slice(1)}'`);
            continue;
          }
          rows = await st.queryJSON(params);
        } else {
          rows = await db.queryJSON(text, params);
        }
      } catch (e) {
        if (e.name !== 'KitfoxError') throw e;
        error = e;
      }
      if (head === 'statement ok') {
        if (error) fail(headLine, `expected success, got ${error.message}\n  in: ${text}`);
        else passed++;
      } else if (head === 'statement error') {
        const want = expected.join('\n');
        if (!error) fail(headLine, `expected an error, the statement succeeded\n  in: ${text}`);
        else if (hasExpected && !error.message.includes(want))
          fail(headLine, `error text differs\n  want (substring): ${want}\n  got: ${error.message}`);
        else passed++;
      } else if (/^query( |$)/.test(head)) {
        // query [rowsort] [mask=k1,k2]: as tests/query_runner.cpp.
        const words = head.split(' ').slice(1).filter((w) => w);
        const rowsort = words.includes('rowsort');
        const masked = words.filter((w) => w.startsWith('mask=')).flatMap((w) => w.slice(5).split(','));
        if (words.some((w) => w !== 'rowsort' && !w.startsWith('mask='))) {
          fail(headLine, `unknown directive '${head}'`);
          continue;
        }
        if (error) {
          fail(headLine, `query failed: ${error.message}\n  in: ${text}`);
          continue;
        }
        // A masked top-level key's value reads "*" (scores whose last digits may differ by platform).
        let got = rows.map((line) =>
          masked.reduce((l, k) => l.replace(new RegExp(`"${k}":(-?[0-9][0-9.eE+-]*|null|"[^"]*")`), `"${k}":"*"`), line),
        );
        if (rowsort) {
          got = [...got].sort();
          expected = [...expected].sort();
        }
        if (JSON.stringify(got) !== JSON.stringify(expected))
          fail(headLine, `rows differ\n  in: ${text}\n  want:\n    ${expected.join('\n    ')}\n  got:\n    ${got.join('\n    ')}`);
        else passed++;
      } else {
        fail(headLine, `unknown directive '${head}'`);
      }
    }
  } finally {
    await db.close();
  }
  return { passed, failures };
}

