// Browser benchmark: one database shared by several tabs (kitfox/worker's
// connect(), docs/wasm.md "Sharing between tabs") in Debian's Chromium.
//
// 1. A follower's `near` against the leader's own: two tabs of one browser
//    profile connect to the same 100,000 x 128 database; the first leads
//    (its worker holds the OPFS file), the second's calls go to that worker
//    over BroadcastChannels. Each tab runs the same top-10 queries at
//    ef=100, one at a time, timed in the page; then a point read by id, for
//    the messaging alone.
// 2. Takeover: a follower runs `near` in a loop; the leader's tab is
//    closed. Timed: from the close (Date.now() in Node just before
//    page.close()) to the follower leading (its worker started, the WASM
//    module loaded, the file reopened), and to its first answered `near`
//    after that; and the longest pause between two answers of its loop.
//    A fresh tab then follows the new leader, and the round repeats.
//
// Both in a normal profile (OPFS on disk) and in a private window (OPFS in
// memory). The database is made by the native CLI (bench/browser/make-db.js)
// and cached in build/browser/ beside the browser tests' copy.
//
//   node bench/browser/tabs.js [--quick] [--n 100000] [--dim 128]
//        [--ef-construction 40] [--queries 1000] [--rounds 5] [--out FILE]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { serve } from '../../scripts/serve.js';
import { ARGS, CHROMIUM, argv, flag, opt, root } from './common.js';
import { cachedDatabase, makeDatabase } from './make-db.js';

const quick = flag('--quick');
const N = Number(opt('--n', quick ? 20000 : 100000));
const DIM = Number(opt('--dim', 128));
const EFC = Number(opt('--ef-construction', 40));
const QUERIES = Number(opt('--queries', quick ? 200 : 1000));
const ROUNDS = Number(opt('--rounds', quick ? 3 : 5));
const outFile = opt('--out', null);
const NAME = 'tabs-bench.kfdb';
const log = (s) => process.stderr.write(s + '\n');
const SAFETY = 120000;

const sorted = (xs) => [...xs].sort((a, b) => a - b);
const pct = (xs, p) => {
  const s = sorted(xs);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => {
  const s = sorted(xs);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function tab(context, server) {
  const page = await context.newPage();
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  await page.goto(`${server.url}/tests/browser/page.html`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: SAFETY });
  return page;
}

// Connects the page to the database and records when it starts leading.
async function join(page) {
  return page.evaluate(async (name) => {
    window.db = await kitfox.connect(name);
    window.ledAt = db.isLeader ? Date.now() : null;
    db.on('leader', ({ isLeader }) => {
      if (isLeader && window.ledAt === null) window.ledAt = Date.now();
    });
    return db.isLeader;
  }, NAME);
}

// The same `count` top-10 queries (ef=100), one at a time: each one's ms.
function nearTimes(page, count, warm) {
  return page.evaluate(
    async ([dim, count, warm]) => {
      const qs = [];
      for (let k = 0; k < count + warm; k++) {
        const q = new Float32Array(dim);
        for (let i = 0; i < dim; i++) q[i] = Math.sin((i + 1) * (1 + (k % 97) * 0.37)) + Math.cos(k * 0.11 + i);
        qs.push(q);
      }
      const out = [];
      for (let k = 0; k < qs.length; k++) {
        const t0 = performance.now();
        const rows = await db.near('docs', 'embed', qs[k], { limit: 10, ef: 100 });
        const t = performance.now() - t0;
        if (rows.length !== 10) throw new Error(`near returned ${rows.length} rows`);
        if (k >= warm) out.push(t);
      }
      return out;
    },
    [DIM, count, warm],
  );
}

function pointTimes(page, count) {
  return page.evaluate(async (count) => {
    const st = await db.prepare('get docs select title where id = $1');
    const out = [];
    for (let k = 0; k < count + 50; k++) {
      const t0 = performance.now();
      await st.query([1 + ((k * 7919) % 100000)]);
      if (k >= 50) out.push(performance.now() - t0);
    }
    await st.finalize();
    return out;
  }, count);
}

// The follower's loop of near queries: the Date.now() of each answer.
function startLoop(page) {
  return page.evaluate((dim) => {
    window.loop = { stop: false, done: [], errors: [] };
    const q = new Float32Array(dim);
    for (let i = 0; i < dim; i++) q[i] = Math.sin(i + 1);
    loop.finished = (async () => {
      while (!loop.stop) {
        try {
          await db.near('docs', 'embed', q, { limit: 10, ef: 100 });
          loop.done.push(Date.now());
        } catch (e) {
          loop.errors.push(`${e.code}: ${e.message}`);
        }
      }
    })();
  }, DIM);
}

async function measureIn(context, server, label) {
  log(`${label}: copying the file into OPFS`);
  const first = await tab(context, server);
  await first.evaluate(async (name) => {
    const r = await fetch('/bench-db.kfdb');
    const dir = await navigator.storage.getDirectory();
    const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
    await r.body.pipeTo(w);
  }, NAME);
  let leader = first;
  if (!(await join(leader))) throw new Error('the first tab does not lead');
  let follower = await tab(context, server);
  if (await join(follower)) throw new Error('the second tab leads');

  log(`${label}: near, leader then follower then leader, ${QUERIES} each`);
  const leaderNear = await nearTimes(leader, QUERIES, 100);
  const followerNear = await nearTimes(follower, QUERIES, 100);
  const leaderNear2 = await nearTimes(leader, QUERIES, 20);
  const leaderPoint = await pointTimes(leader, QUERIES);
  const followerPoint = await pointTimes(follower, QUERIES);

  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    await startLoop(follower);
    await follower.waitForFunction(() => loop.done.length >= 20, null, { timeout: SAFETY });
    const closedAt = Date.now();
    await leader.close();
    await follower.waitForFunction(() => window.ledAt !== null && loop.done.some((t) => t > window.ledAt) && loop.done.length >= 40, null, {
      timeout: SAFETY,
    });
    const got = await follower.evaluate(async () => {
      loop.stop = true;
      await loop.finished;
      return { done: loop.done, errors: loop.errors, ledAt: window.ledAt, takeover: db._takeover };
    });
    if (got.errors.length) throw new Error(`the follower's near failed: ${got.errors[0]}`);
    const after = got.done.filter((t) => t >= closedAt);
    // The pauses between two answers that end after the close.
    let gap = 0;
    for (let i = 1; i < got.done.length; i++) if (got.done[i] >= closedAt) gap = Math.max(gap, got.done[i] - got.done[i - 1]);
    const firstAfterLead = got.done.find((t) => t >= got.ledAt);
    rounds.push({
      leads: got.ledAt - closedAt,
      answer: firstAfterLead - closedAt,
      gap,
      open: got.takeover,
      beforeLead: after.filter((t) => t < got.ledAt).length,
    });
    log(`  round ${r + 1}/${ROUNDS}: leads after ${got.ledAt - closedAt} ms, first answer after ${firstAfterLead - closedAt} ms`);
    leader = follower;
    follower = await tab(context, server);
    if (await join(follower)) throw new Error('a new tab leads');
    await nearTimes(follower, 50, 0); // the new leader's worker reads what near needs
  }
  await follower.evaluate(() => db.close());
  await leader.evaluate(() => db.close());
  await follower.close();
  await leader.close();
  return { leaderNear, followerNear, leaderNear2, leaderPoint, followerPoint, rounds };
}

function report(m) {
  // The page's clock is coarsened to 0.1 ms (no cross-origin isolation):
  // single calls read in tenths, the mean of many finer.
  const t = (x) => x.toFixed(1);
  const row = (name, xs, note) => `| ${name} | ${t(median(xs))} | ${t(pct(xs, 95))} | ${t(pct(xs, 99))} | ${mean(xs).toFixed(3)} | ${note} |`;
  const lines = [
    '| ms | p50 | p95 | p99 | mean | |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    row('`near` top-10, ef=100, the leader tab', m.leaderNear, `${QUERIES} queries, after 100 unmeasured`),
    row('`near`, a follower tab', m.followerNear, 'the same queries, through the leader\'s worker'),
    row('`near`, the leader tab again', m.leaderNear2, 'after the follower\'s run'),
    row('point read by id (prepared), the leader tab', m.leaderPoint, `${QUERIES} reads`),
    row('point read by id (prepared), a follower tab', m.followerPoint, 'the messaging alone, nearly'),
    '',
    '| takeover, ms | median | min | max | |',
    '| --- | ---: | ---: | ---: | --- |',
  ];
  const r = m.rounds;
  const trow = (name, xs, note) => `| ${name} | ${t(median(xs))} | ${t(Math.min(...xs))} | ${t(Math.max(...xs))} | ${note} |`;
  lines.push(
    trow('leader tab closed → the follower leads', r.map((x) => x.leads), 'its worker started, WASM loaded, file reopened'),
    trow('… → its first `near` answered after that', r.map((x) => x.answer), 'what the follower\'s loop waited, at most'),
    trow('longest pause in the follower\'s `near` loop', r.map((x) => x.gap), 'between two answers, around the close'),
    trow('of which: the new leader\'s connect to open', r.map((x) => x.open.ms), 'from the lock granted to the file open (worker, WASM, open)'),
    trow('of which: the engine\'s open', r.map((x) => x.open.openMs), '`Kitfox.open` in the new worker (lock and handles, then the image)'),
  );
  return lines;
}

async function main() {
  const file = path.join(root, 'build', 'browser', `reopen-${N}x${DIM}-ef${EFC}.kfdb`);
  if (!cachedDatabase(file)) {
    log(`making ${file} with the native CLI (once; cached)`);
    makeDatabase({ out: file, n: N, dim: DIM, efConstruction: EFC, log });
  }
  const size = fs.statSync(file).size;
  const server = await serve({ port: 0, root, files: { '/bench-db.kfdb': file } });
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-tabs-'));
  let context = null;
  let browser = null;
  try {
    context = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, args: ARGS, headless: true });
    const normal = await measureIn(context, server, 'normal profile');
    await context.close();
    context = null;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    const version = browser.version();
    context = await browser.newContext();
    const incognito = await measureIn(context, server, 'private window');
    const cpu = os.cpus()[0]?.model?.trim() || 'unknown CPU';
    const lines = [
      `### Every tab served: ${N.toLocaleString('en-US')} x ${DIM} (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
      '',
      `\`node bench/browser/tabs.js${argv.length ? ' ' + argv.join(' ') : ''}\``,
      '',
      `- Machine: ${cpu}, ${os.cpus().length} logical CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB; ${os.type()} ${os.release()}; Chromium ${version} (Debian's, headless, driven by playwright-core); Node ${process.version}.`,
      `- Data: ${N.toLocaleString('en-US')} documents \`{title, category, embed: vector<${DIM}>}\`, clustered unit vectors, \`@hnsw(cosine, m=16, ef_construction=${EFC})\`, made by the native CLI and copied into OPFS; file ${(size / 2 ** 20).toFixed(1)} MiB.`,
      `- Tabs are pages of one browser context (one origin) on the test page, each with \`connect('${NAME}')\`: the first leads. Latencies are timed in the page around each awaited call, one call at a time. Takeover: ${ROUNDS} rounds; in each, the follower's loop of \`near\` runs, the leader's tab is closed (\`page.close()\`), and a fresh tab joins the new leader for the next round.`,
      '',
      '#### Normal profile (OPFS on disk)',
      '',
      ...report(normal),
      '',
      '#### Private window (OPFS in memory)',
      '',
      ...report(incognito),
    ];
    const text = lines.join('\n') + '\n';
    process.stdout.write(text);
    if (outFile) fs.writeFileSync(outFile, text);
  } finally {
    if (context) await context.close();
    if (browser) await browser.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
    await server.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
