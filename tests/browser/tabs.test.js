// One database shared by the tabs of an origin (kitfox/worker's connect(),
// docs/wasm.md "Sharing between tabs"): tabs are pages of one browser
// context; the first to connect leads (its worker holds the OPFS file), the
// others' calls go to it. Takeovers after the leader's tab is closed or
// refreshed, with writers running: every acknowledged write is in the file,
// none twice. Transactions and prepared statements belong to their tab; the
// change event; `exclusive: true`; another origin. Nothing here waits for a
// time: every wait is for a condition (bounded by SAFETY_MS).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { serve } from '../../scripts/serve.js';
import { BROWSER, newContext, openPage, reload, startBrowser } from './helpers.js';

let env;
let context;

before(async () => {
  env = await startBrowser();
  context = await newContext(env.browser);
});

after(async () => {
  await env?.stop();
});

// Opens `n` tabs and connects each to `name`, one after the other: the
// first leads.
async function tabs(n, name, options = {}) {
  const pages = [];
  for (let i = 0; i < n; i++) {
    const page = await openPage(context, env.url);
    await page.evaluate(
      async ([name, options, tab]) => {
        window.tab = tab;
        window.db = await kitfox.connect(name, options);
        window.changes = [];
        window.offChange = db.on('change', (e) => changes.push(e.collections));
      },
      [name, options, i],
    );
    pages.push(page);
  }
  return pages;
}

const isLeader = (page) => page.evaluate(() => db.isLeader);

async function closeAll(pages) {
  for (const p of pages) await p.close();
}

test('three tabs each write 500 documents and read their own and the others', async () => {
  const pages = await tabs(3, 'three.kfdb');
  assert.deepEqual(await Promise.all(pages.map(isLeader)), [true, false, false]);
  await pages[0].evaluate(() => db.query('create collection docs (tab int, k int, v vector<4> @hnsw(cosine))'));
  const ids = await Promise.all(
    pages.map((p) =>
      p.evaluate(async () => {
        const ids = [];
        for (let k = 0; k < 500; k++) {
          const v = new Float32Array([tab + 1, k / 500, 1, (k % 7) / 7]);
          ids.push((await db.query('put docs {tab: $1, k: $2, v: $3}', [tab, k, v]))[0].id);
        }
        return ids;
      }),
    ),
  );
  assert.equal(new Set(ids.flat()).size, 1500, 'every put got its own id');
  const seen = await Promise.all(
    pages.map((p) =>
      p.evaluate(async () => {
        const per = [];
        for (let t = 0; t < 3; t++) per.push((await db.query('get docs where tab = $1 count', [t]))[0].count);
        const all = (await db.query('get docs count'))[0].count;
        const own = await db.query('get docs select k where tab = $1 order k', [tab]);
        const near = await db.near('docs', 'v', new Float32Array([2, 0.5, 1, 0]), { limit: 3, select: ['tab', 'k', 'v'] });
        const st = await db.prepare('get docs select tab, k where id = $1');
        const one = await st.query([1]);
        await st.finalize();
        return {
          per,
          all,
          own: own.every((r, i) => r.k === i) && own.length === 500,
          near: near.map((r) => [r.id, r.tab, r.k]),
          f32: near.every((r) => r.v instanceof Float32Array && r.v.length === 4),
          one,
        };
      }),
    ),
  );
  for (const s of seen) {
    assert.deepEqual(s.per, [500, 500, 500]);
    assert.equal(s.all, 1500);
    assert.equal(s.own, true);
    assert.equal(s.f32, true, 'vectors cross as Float32Array to every tab');
    assert.deepEqual(s.near, seen[0].near, 'the same answers in every tab');
    assert.deepEqual(s.one, seen[0].one);
  }
  // Every tab heard of the writes (the last one's event names the collection).
  for (const p of pages) {
    await p.waitForFunction(() => changes.length > 0 && changes.at(-1).includes('docs'));
  }
  await closeAll(pages);
});

// Writers in `pages` (loops of `put w {tab, k}` with k counting up); a
// 'failed' error is a write that may or may not have landed.
async function startWriters(pages) {
  for (const p of pages) {
    await p.evaluate(() => {
      window.w = { acked: [], failed: [], errors: [], reads: 0, readErrors: [], stop: false };
      w.done = (async () => {
        for (let k = 0; !w.stop; k++) {
          try {
            await db.query('put w {tab: $1, k: $2}', [tab, k]);
            w.acked.push(k);
            console.log(`acked ${tab} ${k}`);
          } catch (e) {
            if (e.code === 'failed' && /may or may not have landed/.test(e.message)) w.failed.push(k);
            else w.errors.push(`${k}: ${e.code}: ${e.message}`);
          }
          // Reads in flight at a takeover are sent again: they never fail.
          try {
            await db.query('get w where tab = $1 count', [tab]);
            w.reads++;
          } catch (e) {
            w.readErrors.push(`${e.code}: ${e.message}`);
          }
        }
      })();
    });
  }
}

async function stopWriters(pages) {
  const out = [];
  for (const p of pages) {
    out.push(
      await p.evaluate(async () => {
        w.stop = true;
        await w.done;
        return { tab, acked: w.acked, failed: w.failed, errors: w.errors, reads: w.reads, readErrors: w.readErrors };
      }),
    );
  }
  return out;
}

// Checks the documents of `w` against what the writers were told: each
// acknowledged write once, a failed one at most once, nothing else (a
// writer whose tab was killed, `killed`, may have landed writes after the
// last one it told of).
function checkWrites(rows, writers) {
  const count = new Map();
  for (const r of rows) count.set(`${r.tab}/${r.k}`, (count.get(`${r.tab}/${r.k}`) ?? 0) + 1);
  const twice = [...count].filter(([, n]) => n > 1);
  assert.deepEqual(twice, [], 'nothing is written twice');
  for (const { tab, acked, failed, killed } of writers) {
    const missing = acked.filter((k) => !count.has(`${tab}/${k}`));
    assert.deepEqual(missing, [], `tab ${tab}: every acknowledged write is there`);
    const known = new Set([...acked, ...failed]);
    const last = Math.max(-1, ...acked);
    const extra = rows.filter((r) => r.tab === tab && !known.has(r.k) && !(killed && r.k > last)).map((r) => r.k);
    assert.deepEqual(extra, [], `tab ${tab}: no write that was not made`);
  }
}

// The leader (tab 0) and two followers write; `kill` ends the leader's tab;
// the followers go on. What the leader's tab was told arrives through its
// console, as far as it got before the tab went away. `kill` may return
// the tab again, connected (a refresh): it is closed with the others.
async function takeover(name, kill) {
  const pages = await tabs(3, name);
  const [leader, ...followers] = pages;
  const leaderAcked = [];
  leader.on('console', (m) => {
    const hit = /^acked 0 (\d+)$/.exec(m.text());
    if (hit) leaderAcked.push(Number(hit[1]));
  });
  await leader.evaluate(() => db.query('create collection w (tab int, k int)'));
  await startWriters(pages);
  for (const p of pages) await p.waitForFunction(() => w.acked.length >= 20);
  const before = await Promise.all(followers.map((p) => p.evaluate(() => w.acked.length)));
  const again = await kill(leader);
  // One of the followers takes over (the old leader's worker may answer a
  // few calls more before it ends), and both go on: each has 20 more
  // acknowledged writes after that.
  await Promise.any(followers.map((p) => p.waitForFunction(() => db.isLeader)));
  const after = await Promise.all(followers.map((p) => p.evaluate(() => w.acked.length)));
  for (const [i, p] of followers.entries()) await p.waitForFunction((n) => w.acked.length >= n, Math.max(before[i], after[i]) + 20);
  const leaders = await Promise.all(followers.map(isLeader));
  assert.equal(leaders.filter(Boolean).length, 1, `one follower leads: ${leaders}`);
  const writers = await stopWriters(followers);
  for (const wr of writers) {
    assert.deepEqual(wr.errors, [], `tab ${wr.tab}: no error but 'failed'`);
    assert.deepEqual(wr.readErrors, [], `tab ${wr.tab}: reads never fail`);
  }
  writers.push({ tab: 0, acked: leaderAcked, failed: [], killed: true }); // what it told before it went
  const rows = await followers[0].evaluate(() => db.query('get w select tab, k'));
  checkWrites(rows, writers);
  // The same is in the file: close all, open it alone in a new tab.
  for (const p of again ? [again, ...followers] : followers) await p.evaluate(() => db.close());
  const fresh = await openPage(context, env.url);
  const inFile = await fresh.evaluate(async (name) => {
    const db = await kitfox.connect(name, { exclusive: true, lockTimeout: 60000 });
    const rows = await db.query('get w select tab, k');
    await db.close();
    return rows;
  }, name);
  assert.deepEqual(inFile, rows);
  const failed = writers.reduce((n, x) => n + x.failed.length, 0);
  console.log(
    `takeover (${name}): ${rows.length} documents; acknowledged ${writers.map((x) => `tab ${x.tab} ${x.acked.length}`).join(', ')}; ` +
      `'failed' (may have landed): ${failed}, of which landed: ${rows.filter((r) => writers.some((x) => x.tab === r.tab && x.failed.includes(r.k))).length}`,
  );
  await closeAll(again ? [fresh, again, ...followers] : [fresh, ...followers]);
}

test('close the leader while the others write: they go on, every acknowledged write is there once', async () => {
  await takeover('close.kfdb', (page) => page.close());
});

test('refresh the leader while the others write: the same', async () => {
  await takeover('refresh.kfdb', async (page) => {
    await reload(page);
    // The refreshed tab connects again and follows, seeing what is there.
    const n = await page.evaluate(async () => {
      window.db = await kitfox.connect('refresh.kfdb');
      return (await db.query('get w count'))[0].count;
    });
    assert.ok(n > 0);
    return page;
  });
});

test("the leader's tab crashes while the others write: the same", { skip: BROWSER !== 'chromium' && 'a renderer crash is driven in Chromium only' }, async () => {
  await takeover('crash.kfdb', async (page) => {
    // chrome://crash ends the tab's renderer at once, as a real crash does.
    const crashed = new Promise((resolve) => page.once('crash', resolve));
    page.goto('chrome://crash').catch(() => {});
    await crashed;
  });
});

test('the leader calls close(): the database is handed over with no call failing', async () => {
  const pages = await tabs(3, 'handover.kfdb');
  const [leader, ...followers] = pages;
  await leader.evaluate(() => db.query('create collection w (tab int, k int)'));
  await startWriters(followers);
  for (const p of followers) await p.waitForFunction(() => w.acked.length >= 20);
  const before = await Promise.all(followers.map((p) => p.evaluate(() => w.acked.length)));
  await leader.evaluate(() => db.close());
  for (const [i, p] of followers.entries()) await p.waitForFunction((n) => w.acked.length >= n, before[i] + 20);
  const writers = await stopWriters(followers);
  for (const wr of writers) {
    assert.deepEqual(wr.errors, []);
    assert.deepEqual(wr.failed, [], 'a handover answers every call: run, or moved to the next leader');
    assert.deepEqual(wr.readErrors, []);
  }
  checkWrites(await followers[0].evaluate(() => db.query('get w select tab, k')), writers);
  await closeAll(pages);
});

test('a transaction belongs to its tab: the others wait for its end; it fails when its leader goes', async () => {
  const [a, b] = await tabs(2, 'txn.kfdb');
  await a.evaluate(() => db.query('create collection t (who text)'));
  // b (a follower) opens a transaction; a's write, made meanwhile, waits
  // for its end instead of joining it.
  const inside = await b.evaluate(async () => {
    await db.query('begin');
    await db.query('put t {who: "b1"}');
    await db.query('put t {who: "b2"}');
    return (await db.query('get t count'))[0].count; // sees its own queued writes
  });
  assert.equal(inside, 2);
  await a.evaluate(() => {
    window.aWrite = db.query('put t {who: "a"}').then(() => 'done');
  });
  await b.evaluate(() => db.query('rollback'));
  const after = await a.evaluate(async () => {
    await aWrite;
    return (await db.query('get t select who')).map((r) => r.who);
  });
  assert.deepEqual(after, ['a'], "a's write landed after b's rollback, outside it");
  // b begins again; then the leader's tab goes away. b's transaction is lost:
  // its calls fail until its rollback, which succeeds; nothing of it landed.
  await b.evaluate(async () => {
    await db.query('begin');
    await db.query('put t {who: "lost"}');
    window.get = await db.prepare('get t select who where who = $1');
    window.put = await db.prepare('put t {who: $1}');
  });
  await a.close();
  await b.waitForFunction(() => db.isLeader);
  const r = await b.evaluate(async () => {
    const out = {};
    try {
      await db.query('put t {who: "after"}');
    } catch (e) {
      out.write = e.code;
      out.message = e.message;
    }
    try {
      await db.query('commit');
    } catch (e) {
      out.commit = e.code;
    }
    // Prepared statements are prepared again on the new leader.
    await put.query(['prepared']);
    out.prepared = (await get.query(['prepared'])).map((x) => x.who);
    out.all = (await db.query('get t select who')).map((x) => x.who);
    return out;
  });
  assert.equal(r.write, 'failed');
  assert.match(r.message, /transaction was lost/);
  assert.equal(r.commit, 'failed');
  assert.deepEqual(r.prepared, ['prepared']);
  assert.deepEqual(r.all, ['a', 'prepared'], 'nothing of the lost transaction landed');
  await b.close();
});

test("beside another tab's transaction a tab connects; a begin a handover moved begins on the next leader", async () => {
  const [a, b, c] = await tabs(3, 'beside.kfdb');
  await a.evaluate(() => db.query('create collection t (n int)'));
  await c.evaluate(() => db.query('begin'));
  // A tab connecting now does not wait for c's commit (its first call runs
  // beside the transaction).
  const d = await openPage(context, env.url);
  await d.evaluate(() => {
    kitfox.connect('beside.kfdb').then((db) => {
      window.db = db;
      window.connected = true;
    });
  });
  await d.waitForFunction(() => window.connected === true);
  // b's transaction waits at the leader behind c's; the leader then hands
  // over, answering it 'moved' (not run): it begins on the next leader.
  await b.evaluate(() => {
    window.res = [];
    const note = (what, p) => p.then(() => res.push(`${what} ok`), (e) => res.push(`${what} ${e.code}: ${e.message}`));
    note('begin', db.query('begin'));
    note('put', db.query('put t {n: 1}'));
    note('commit', db.query('commit'));
  });
  await a.evaluate(() => db.close());
  await c.evaluate(() => db.query('rollback')); // lost with a's worker: nothing to roll back
  await b.waitForFunction(() => res.length === 3);
  assert.deepEqual(await b.evaluate(() => res), ['begin ok', 'put ok', 'commit ok']);
  assert.deepEqual(await d.evaluate(() => db.query('get t select n')), [{ id: 1, n: 1 }]);
  await closeAll([a, b, c, d]);
});

test('call() answers a copy of what the module keeps, runs the caller\'s own module only; params are checked as Kitfox checks them', async () => {
  const [a] = await tabs(1, 'calls.kfdb', { module: '/tests/browser/fixtures/keeps.js' });
  const [b] = await tabs(1, 'calls.kfdb');
  await a.evaluate(() => db.query('create collection t (n int, j json)'));
  // Twice from the leader's own page: the module's vector was not given away.
  assert.deepEqual(await a.evaluate(async () => [Array.from(await db.call('centroid')), Array.from(await db.call('centroid'))]), [[1, 2, 3, 4], [1, 2, 3, 4]]);
  // b gave no module: the leader's is not b's.
  const none = await b.evaluate(() => db.call('centroid').then(() => 'ran', (e) => `${e.code}: ${e.message}`));
  assert.match(none, /^invalid: invalid error: no worker module was given to connect\(\)/);
  // What Kitfox refuses is refused here too, naming the parameter, by the
  // leader's page and a follower's alike; nothing is written.
  for (const page of [a, b]) {
    const said = await page.evaluate(async () => {
      class Point {
        constructor() {
          this.x = 1;
        }
      }
      const out = [];
      const attempt = (p) => p.then(() => out.push('stored'), (e) => out.push(`${e.code}: ${e.message}`));
      await attempt(db.query('put t {j: $1}', [{ p: new Point() }]));
      await attempt(db.query('put t {j: $1}', [() => 1]));
      await attempt(db.batch([['put t {n: 1}'], ['put t {j: $1}', [Symbol('s')]]]));
      const st = await db.prepare('put t {j: $1}');
      await attempt(st.query([new Map()]));
      return out;
    });
    assert.deepEqual(said, [
      'type: type error: parameter $1.p: a Point cannot be stored (use a plain object, an Array, a Float32Array, a Uint8Array or a Date)',
      'type: type error: parameter $1: a function cannot be stored',
      'type: type error: batch entry 2: parameter $1: a symbol cannot be stored',
      'type: type error: parameter $1: a Map cannot be stored (use a plain object, an Array, a Float32Array, a Uint8Array or a Date)',
    ]);
  }
  assert.deepEqual(await b.evaluate(() => db.query('get t count')), [{ count: 0 }]);
  await closeAll([a, b]);
});

// A leader tab `a` with the module of tests/browser/fixtures/keeps.js, and
// a follower `b` that made collection t and put {n: 1} through it.
async function leaderWithModule(name, options = {}) {
  const [a] = await tabs(1, name, { module: '/tests/browser/fixtures/keeps.js', ...options });
  const [b] = await tabs(1, name);
  await b.evaluate(() => db.query('create collection t (n int)'));
  await b.evaluate(() => db.query('put t {n: 1}'));
  return [a, b];
}

test("a leader whose close() fails (a flush failed before) hands over all the same, and says so", async () => {
  const [a, b] = await leaderWithModule('failing.kfdb', { sync: 'always' });
  await a.evaluate(() => db.call('breakFlush'));
  const refused = await b.evaluate(() => db.query('put t {n: 2}').then(() => 'acknowledged', (e) => e.code));
  assert.notEqual(refused, 'acknowledged');
  const closed = await a.evaluate(() => db.close().then(() => 'ok', (e) => `${e.code}: ${e.message}`));
  assert.match(closed, /^failed: /);
  await b.waitForFunction(() => db.isLeader);
  const after = await b.evaluate(async () => {
    await db.query('put t {n: 3}');
    return (await db.query('get t select n where n != 2')).map((r) => r.n);
  });
  assert.deepEqual(after, [1, 3]);
  await closeAll([a, b]);
});

test("a leader whose module failed hands over: the other tabs go on with a new one", async () => {
  // Every tab got 'failed' for good: a follower's connect() joined the
  // same leader, whose worker held the broken module.
  const [a, b] = await leaderWithModule('broken.kfdb');
  await a.evaluate(() => db.call('breakModule').catch(() => {}));
  await b.waitForFunction(() => db.isLeader);
  const after = await b.evaluate(async () => {
    await db.query('put t {n: 2}');
    return (await db.query('get t select n')).map((r) => r.n);
  });
  assert.deepEqual(after, [1, 2]);
  await closeAll([a, b]);
});

test('the change event names the collections written, in every tab, once a write lands', async () => {
  const [a, b] = await tabs(2, 'change.kfdb', { module: '/tests/browser/fixtures/gen.js' });
  await a.evaluate(async () => {
    await db.query('create collection x (n int)');
    await db.query('create collection y (n int)');
    await db.query('create collection z (n int)');
  });
  // b writes; both hear it.
  await b.evaluate(async () => {
    changes.length = 0;
    await db.query('put x {n: 1}');
    await db.batch([['put y {n: 1}'], ['put z {n: 1}'], ['get x count']]);
    await db.query('get x count'); // a read: no event
    await db.query('begin');
    await db.query('put x {n: 2}');
    await db.query('rollback'); // nothing landed: no event
    await db.query('begin');
    await db.query('put y {n: 2}');
    await db.query('set z {n: 3}');
    await db.query('commit');
    const ins = await db.prepare('insert x {n: $1}');
    await ins.query([9]);
    await db.call('load', { n: 10, dim: 4 }); // a worker module's writes
    try {
      await db.query('put x {n: "not an int"}'); // refused: no event
    } catch {}
    await db.query('del y where n = 1');
  });
  const expected = [['x'], ['y', 'z'], ['y', 'z'], ['x'], ['items'], ['y']];
  for (const p of [a, b]) {
    await p.waitForFunction((n) => changes.length >= n, expected.length);
    const got = await p.evaluate(() => changes);
    assert.deepEqual(got.slice(-expected.length), expected);
  }
  // Unsubscribed: no more events; another subscription still hears them.
  const heard = await a.evaluate(() => {
    offChange();
    window.later = [];
    db.on('change', (e) => later.push(e.collections));
    return changes.length;
  });
  await b.evaluate(() => db.query('put z {n: 4}'));
  await a.waitForFunction(() => later.length === 1);
  assert.deepEqual(await a.evaluate(() => later), [['z']]);
  assert.equal(await a.evaluate(() => changes.length), heard, 'nothing after off()');
  // An exclusive connection hears its own writes.
  const own = await a.evaluate(async () => {
    const d = await kitfox.connect('change-alone.kfdb', { exclusive: true });
    const seen = [];
    d.on('change', (e) => seen.push(e.collections));
    await d.query('create collection q (n int)');
    await d.query('put q {n: 1}');
    await d.close();
    return seen;
  });
  assert.deepEqual(own, [['q'], ['q']]);
  await a.evaluate(() => {
    let err = null;
    try {
      db.on('nothing', () => {});
    } catch (e) {
      err = e.code;
    }
    return err;
  }).then((code) => assert.equal(code, 'invalid'));
  await closeAll([a, b]);
});

test('exclusive: true still refuses a second tab, and a shared leader refuses it', async () => {
  const a = await openPage(context, env.url);
  const b = await openPage(context, env.url);
  const locked = "locked error: database 'excl.kfdb' is locked by another tab or worker";
  await a.evaluate(async () => {
    window.db = await kitfox.connect('excl.kfdb', { exclusive: true });
    await db.query('create collection t (n int)');
  });
  const attempt = (options) =>
    b.evaluate(async (options) => {
      try {
        const d = await kitfox.connect('excl.kfdb', options);
        await d.close();
        return 'opened';
      } catch (e) {
        return `${e.code}: ${e.message}`;
      }
    }, options);
  assert.equal(await attempt({ exclusive: true }), `locked: ${locked}`);
  assert.equal(await attempt({}), `locked: ${locked}`, 'a shared connection does not wait for an exclusive holder');
  await a.evaluate(() => db.close());
  // Now a shared leader holds it: an exclusive connection is refused.
  await a.evaluate(async () => {
    window.db = await kitfox.connect('excl.kfdb');
  });
  assert.equal(await attempt({ exclusive: true }), `locked: ${locked}`);
  assert.equal(await attempt({}), 'opened', 'a shared one follows');
  assert.equal(
    await b.evaluate(async () => {
      try {
        await kitfox.connect('excl.kfdb', { exclusive: 'yes' });
      } catch (e) {
        return e.code;
      }
    }),
    'invalid',
  );
  await closeAll([a, b]);
});

test('a tab of another origin never sees the database', async () => {
  const other = await serve({ port: 0 });
  try {
    const [a, b] = await tabs(2, 'origin.kfdb');
    await a.evaluate(async () => {
      await db.query('create collection secret (n int)');
      await db.query('put secret {n: 42}');
    });
    const page = await openPage(context, other.url); // another port: another origin
    const r = await page.evaluate(async () => {
      const db = await kitfox.connect('origin.kfdb');
      const out = { leader: db.isLeader };
      try {
        await db.query('get secret count');
      } catch (e) {
        out.read = e.code;
      }
      await db.query('create collection secret (n int)');
      await db.query('put secret {n: 7}');
      out.own = (await db.query('get secret select n')).map((x) => x.n);
      await db.close();
      return out;
    });
    assert.deepEqual(r, { leader: true, read: 'not_found', own: [7] }, 'its own leader over its own OPFS');
    const mine = await b.evaluate(async () => (await db.query('get secret select n')).map((x) => x.n));
    assert.deepEqual(mine, [42]);
    assert.equal(await a.evaluate(() => db.isLeader), true, 'the first origin kept its leader');
    await closeAll([a, b, page]);
  } finally {
    await other.close();
  }
});

test('a refresh while the leader is busy: the reloaded tab waits for the old worker by itself', async () => {
  const page = await openPage(context, env.url);
  // A long write in the worker (no await in it: the worker never yields).
  await page.evaluate(() => {
    window.landed = 0;
    kitfox
      .connect('busy-shared.kfdb', { module: '/tests/browser/fixtures/gen.js' })
      .then((db) => db.call('load', { n: 300000, dim: 64 }, { onProgress: (p) => (window.landed = p.done) }));
  });
  await page.waitForFunction(() => window.landed >= 2000);
  const landedBefore = await page.evaluate(() => window.landed);
  await reload(page);
  // No lockTimeout: the old worker's epoch lock says a leader is on its way
  // out, so the new one waits for the file (docs/wasm.md).
  const r = await page.evaluate(async () => {
    let db = await kitfox.connect('busy-shared.kfdb');
    const out = { leader: db.isLeader, count: (await db.query('get items count'))[0].count };
    await db.query('put items {title: "after", n: -1}');
    await db.close();
    db = await kitfox.connect('busy-shared.kfdb');
    out.reopened = (await db.query('get items count'))[0].count;
    await db.close();
    return out;
  });
  assert.equal(r.leader, true);
  assert.ok(r.count >= landedBefore, 'what had landed before the reload is kept');
  assert.ok(r.count > 0 && r.count % 500 === 0, 'whole batches only');
  assert.equal(r.reopened, r.count + 1);
  await page.close();
});
