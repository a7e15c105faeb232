// A large load: 100k documents put through list params in chunks, in a file,
// then read back after a reopen.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';

import { Kitfox } from '../../js/index.js';
import { tempDir } from './helpers.js';

test('100k documents in chunks of 1000, then reopened', async () => {
  const file = path.join(tempDir(), 'large.kfdb');
  let db = await Kitfox.open(file, { sync: 'off' });
  db.query('create collection docs (title text, n int, tags [text])');
  const total = 100_000;
  const chunk = 1000;
  for (let start = 0; start < total; start += chunk) {
    const docs = [];
    for (let i = start; i < start + chunk; i++) docs.push({ title: `document number ${i}`, n: i, tags: i % 2 ? ['odd'] : ['even'] });
    const ids = db.query('put docs $1', [docs]);
    assert.equal(ids.length, chunk);
  }
  assert.equal(db.query('get docs count')[0].count, total);
  // One statement with a bigger list is one record too.
  db.query('put docs $1', [Array.from({ length: 20_000 }, (_, i) => ({ title: 'more', n: total + i }))]);
  db.close();
  db = await Kitfox.open(file);
  assert.equal(db.query('get docs count')[0].count, total + 20_000);
  assert.deepEqual(db.query('get docs select title, n where id = $1', [54_321]), [{ id: 54_321, title: 'document number 54320', n: 54_320 }]);
  assert.equal(db.query('get docs where tags has "odd" and n < 1000 count')[0].count, 500);
  const rows = db.query('get docs where n >= $1 limit 3', [99_998]);
  assert.deepEqual(rows.map((r) => r.n), [99_998, 99_999, 100_000]);
  db.close();
});
