// The page-refresh reopen of 100 000 documents with 128-dim vectors under
// HNSW over OPFS: connect() (worker start, WASM load, open) plus the first
// near query, after a reload of a page that had the database open. The file
// is made by the native CLI (the same bytes as WASM would write; building
// 100k x 128 serially in WASM takes minutes) with ef_construction=40 to keep
// the stage short (the graph's size and layout do not depend on it), cached
// in build/browser/, and copied into OPFS by the page. The timing is printed,
// never asserted (a busy machine is slow; bench/browser/ measures it for the
// record). How the host reads vector tables and graphs is forced with the
// open option readsOnDemand, both ways, and the answers compared: the host's
// own choice is a measurement (js/hosts/opfs.js), so only its being made is
// checked.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { cachedDatabase, makeDatabase } from '../../bench/browser/make-db.js';
import { SAFETY_MS, newContext, openPage, reload, root, startBrowser, startProfile } from './helpers.js';

const N = 100000;
const DIM = 128;
const FILE = `build/browser/reopen-${N}x${DIM}-ef40.kfdb`;
let env;

before(async () => {
  if (!cachedDatabase(path.join(root, FILE)))
    makeDatabase({ out: path.join(root, FILE), n: N, dim: DIM, efConstruction: 40, log: console.log });
  env = await startBrowser();
});

after(async () => {
  await env?.stop();
});

// connect + first near, measured in the page. `options` go to connect();
// after a reload the old worker lets go of the file asynchronously, so
// connect waits for it (lockTimeout).
async function reopenOnce(page, options = {}) {
  return page.evaluate(async ([dim, options]) => {
    const q = new Float32Array(dim);
    for (let i = 0; i < dim; i++) q[i] = Math.sin(i + 1);
    const t0 = performance.now();
    const db = await kitfox.connect('big.kfdb', options);
    const t1 = performance.now();
    const rows = await db.near('docs', 'embed', q, { limit: 10, ef: 100, select: ['title'] });
    const t2 = performance.now();
    window.db = db; // left open: the next reload ends it, as a refresh does
    return { connectMs: t1 - t0, nearMs: t2 - t1, totalMs: t2 - t0, rows: rows.length, timings: db.timings };
  }, [DIM, { lockTimeout: SAFETY_MS, ...options }]);
}

// Sanity of a measured time that no machine can miss.
function assertTime(ms, what) {
  assert.ok(Number.isFinite(ms) && ms > 0, `${what}: ${ms}`);
}

// The rows of a few near queries with filters and selects, to compare the
// two ways of reading the file.
async function answers(page) {
  return page.evaluate(async (dim) => {
    const out = [];
    for (let k = 0; k < 5; k++) {
      const q = new Float32Array(dim);
      for (let i = 0; i < dim; i++) q[i] = Math.cos(i * (k + 1));
      out.push(await db.near('docs', 'embed', q, { limit: 10, ef: 64, select: ['title', 'category'] }));
      out.push(await db.near('docs', 'embed', q, { limit: 5, where: 'category = $1', params: ['c3'] }));
    }
    return JSON.stringify(out);
  }, DIM);
}

let privateAnswers = null;

test(`reopen after a page refresh: ${N} x ${DIM} with @hnsw over OPFS`, async () => {
  const context = await newContext(env.browser);
  const page = await openPage(context, env.url);
  const size = await page.evaluate((url) => opfs.fetchInto(url, 'big.kfdb'), '/' + FILE);
  assert.equal(size, fs.statSync(path.join(root, FILE)).size);

  // A private (incognito) context's OPFS is slow per call: the host reads
  // the whole file on open there, as forced here.
  const whole = { readsOnDemand: false };
  const first = await reopenOnce(page, whole); // the first open after the copy
  assert.equal(first.rows, 10);
  assert.equal(first.timings.readsOnDemand, false);
  const count = await page.evaluate(async () => (await db.query('get docs count'))[0].count);
  assert.equal(count, N);

  const runs = [];
  for (let i = 0; i < 3; i++) {
    await reload(page);
    const r = await reopenOnce(page, whole);
    assert.equal(r.rows, 10);
    assert.equal(r.timings.readsOnDemand, false);
    runs.push(r);
  }
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`reopen after refresh, ${N} x ${DIM} (file ${(size / 1048576).toFixed(1)} MiB), ms:`);
  console.log('   total  connect   (wasm     open)    near');
  for (const r of runs) console.log(`${f(r.totalMs)}  ${f(r.connectMs)}  ${f(r.timings.loadMs)}  ${f(r.timings.openMs)}  ${f(r.nearMs)}`);
  for (const r of runs) {
    assertTime(r.totalMs, 'reopen + first near');
    assert.ok(r.totalMs >= r.connectMs, 'connect is part of the total');
  }
  privateAnswers = await answers(page);

  // The same file read block by block on first use: the same answers.
  await reload(page);
  const onDemand = await reopenOnce(page, { readsOnDemand: true });
  assert.equal(onDemand.rows, 10);
  assert.equal(onDemand.timings.readsOnDemand, true);
  assert.equal(await answers(page), privateAnswers);

  // Left to the host, which times a few reads: either way, the same answers.
  await reload(page);
  const chosen = await reopenOnce(page);
  assert.equal(chosen.rows, 10);
  assert.equal(typeof chosen.timings.readsOnDemand, 'boolean');
  console.log(`private context, the host's choice: ${chosen.timings.readsOnDemand ? 'block by block' : 'the whole file'}`);
  assert.equal(await answers(page), privateAnswers);
  await page.close();
  await context.close();
});

test('in a normal profile the same file is read block by block on first use, with the same answers', async () => {
  const profile = await startProfile();
  try {
    const page = await openPage(profile.context, env.url);
    await page.evaluate((url) => opfs.fetchInto(url, 'big.kfdb'), '/' + FILE);
    for (let i = 0; i < 2; i++) {
      if (i) await reload(page);
      // On disk OPFS reads are cheap: the host reads block by block there,
      // as forced here.
      const r = await reopenOnce(page, { readsOnDemand: true });
      assert.equal(r.rows, 10);
      assert.equal(r.timings.readsOnDemand, true);
      assertTime(r.totalMs, 'reopen + first near');
      console.log(`normal profile, refresh ${i}: total ${r.totalMs.toFixed(1)} ms (open ${r.timings.openMs.toFixed(1)}, near ${r.nearMs.toFixed(1)})`);
    }
    const got = await answers(page);
    if (privateAnswers) assert.equal(got, privateAnswers);
    await page.close();
  } finally {
    await profile.stop();
  }
});
