// The web demo (web-demo/) as a person would use it: create a small sample,
// run queries (a bad one shows its error next to the box), refresh the page
// and find the data still there with the reopen time shown. Leaves a
// screenshot in test-results/web-demo.png.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { BROWSER, newContext, results, root, startBrowser } from './helpers.js';

let env;

before(async () => {
  env = await startBrowser();
});

after(async () => {
  await env?.stop();
});

test('web demo: create a sample, query, refresh, reopen', async () => {
  const context = await newContext(env.browser, { viewport: { width: 1200, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${env.url}/web-demo/`);
  await page.waitForSelector('body[data-ready="true"]');
  assert.equal(await page.isHidden('#nosupport'), true);
  assert.equal(await page.textContent('#reopen-ms'), '–', 'no database yet');

  await page.selectOption('#size', '2000');
  await page.click('#create');
  await page.waitForFunction(() => /Created 2,000 documents/.test(document.getElementById('sample-message').textContent), null, {
    timeout: 120000,
  });
  assert.equal(await page.textContent('#stat-docs'), '2,000');
  await page.waitForFunction(() => document.querySelectorAll('#results tbody tr').length === 10);

  // A hybrid query from its preset button.
  await page.click('#presets button:has-text("hybrid")');
  await page.waitForFunction(() => document.querySelector('#results th:last-child')?.textContent === '_score');
  assert.equal(await page.locator('#results tbody tr').count(), 10);
  assert.equal(await page.textContent('#query-error'), '');

  // A bad statement: the error shows next to the box, with its position.
  await page.fill('#query', 'get docs where year >');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('query-error').textContent !== '');
  assert.match(await page.textContent('#query-error'), /^syntax error at 21: /);

  // Any statement: a filtered near, typed.
  await page.fill('#query', 'get docs select title, year where year >= 2020 near embed $1 limit 5');
  await page.press('#query', 'Control+Enter');
  await page.waitForFunction(() => document.getElementById('query-error').textContent === '' && /5 rows/.test(document.getElementById('result-count').textContent));
  const years = await page.$$eval('#results tbody tr td:nth-child(3)', (tds) => tds.map((td) => Number(td.textContent)));
  assert.ok(years.length === 5 && years.every((y) => y >= 2020), `years ${years}`);
  assert.equal(await page.locator('#chart rect').count(), 4, 'the chart has a bar per query (near after create, hybrid, bad, filtered)');

  // Refresh: the data is there and the reopen time is shown.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  assert.equal(await page.textContent('#stat-docs'), '2,000');
  const reopen = await page.textContent('#reopen-ms');
  assert.match(reopen, /^\d+(\.\d+)? (ms|s)$/);
  const ms = Number(await page.getAttribute('body', 'data-reopen-ms'));
  console.log(`web demo: reopen after refresh (2,000 docs): ${ms} ms; detail: ${await page.textContent('#reopen-detail')}`);
  assert.ok(Number.isFinite(ms) && ms > 0, `the reopen time shown: ${ms}`); // how long it takes: bench/browser/
  await page.waitForFunction(() => document.querySelectorAll('#results tbody tr').length === 10);
  assert.match(await page.textContent('#time-index'), /\d/);

  fs.mkdirSync(results, { recursive: true });
  await page.screenshot({ path: path.join(results, BROWSER === 'firefox' ? 'web-demo-firefox.png' : 'web-demo.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// A download and a file input: Playwright's calls, so Chromium only (the
// Firefox run drives the browser through Puppeteer over WebDriver BiDi).
test('web demo: export the file (the native CLI opens it) and import it back', { skip: BROWSER === 'firefox' && 'downloads and file inputs are driven through Playwright, Chromium only' }, async () => {
  const context = await newContext(env.browser);
  const page = await context.newPage();
  await page.goto(`${env.url}/web-demo/`);
  await page.waitForSelector('body[data-ready="true"]');
  await page.selectOption('#size', '2000');
  await page.click('#create');
  await page.waitForFunction(() => /Created 2,000 documents/.test(document.getElementById('sample-message').textContent), null, {
    timeout: 120000,
  });
  await page.fill('#query', 'put docs {title: "exported and imported", category: "tech", year: 2030, embed: $1}');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('stat-docs').textContent === '2,001');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-demo-'));
  try {
    const file = path.join(dir, 'kitfox-demo.kfdb');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    await download.saveAs(file);
    const cli = (stmt) => execFileSync(path.join(root, 'build', 'kitfox'), [file, '-c', stmt], { encoding: 'utf8' }).trim();
    assert.equal(cli('get docs count'), '{"count":2001}');
    assert.equal(cli('get docs select title where year = 2030'), '{"id":2001,"title":"exported and imported"}');

    // A file that is no kitfox database is refused, and the database it
    // would have replaced is left as it was.
    const junk = path.join(dir, 'notes.txt');
    fs.writeFileSync(junk, 'these are my notes, not a database\n'.repeat(100));
    await page.setInputFiles('#import', junk);
    await page.waitForFunction(() => /^Could not open notes\.txt: .*left as it was/.test(document.getElementById('sample-message').textContent));
    assert.equal(await page.textContent('#stat-docs'), '2,001');
    await page.fill('#query', 'get docs select title where year = 2030');
    await page.click('#run');
    await page.waitForFunction(() => /1 row /.test(document.getElementById('result-count').textContent));

    // Delete, then import the exported file.
    await page.click('#delete');
    await page.waitForFunction(() => document.getElementById('sample-message').textContent === 'Deleted.');
    assert.equal(await page.textContent('#stat-docs'), '0');
    await page.setInputFiles('#import', file);
    await page.waitForFunction(() => /^Imported/.test(document.getElementById('sample-message').textContent));
    assert.equal(await page.textContent('#stat-docs'), '2,001');
    await page.fill('#query', 'get docs select title where year = 2030');
    await page.click('#run');
    await page.waitForFunction(() => /1 row /.test(document.getElementById('result-count').textContent));
    assert.equal(await page.textContent('#results tbody td:nth-child(2)'), 'exported and imported');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  await context.close();
});

// Two tabs of the demo share the database: the second follows the first's
// writes (the connection's change event) and takes over when it closes.
test('web demo in two tabs: a write in one shows in the other', async () => {
  const context = await newContext(env.browser);
  const errors = [];
  const tab = async () => {
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${env.url}/web-demo/`);
    await page.waitForSelector('body[data-ready="true"]');
    return page;
  };
  const a = await tab();
  const b = await tab();
  assert.equal(await a.textContent('#tab-role'), 'serves the database');
  assert.equal(await b.textContent('#tab-role'), 'follows another tab');

  // A builds the sample; B's numbers follow.
  await a.bringToFront();
  await a.selectOption('#size', '2000');
  await a.click('#create');
  await a.waitForFunction(() => /Created 2,000 documents/.test(document.getElementById('sample-message').textContent), null, { timeout: 120000 });
  await b.waitForFunction(() => document.getElementById('stat-docs').textContent === '2,000');
  assert.match(await b.textContent('#last-change'), /^docs at /);

  // A shows a read; B writes a document it matches: A's rows follow. (A
  // tab is brought to the front before it is clicked: a background tab
  // renders nothing, and Firefox's driver waits for a visible element.)
  await a.bringToFront();
  await a.fill('#query', 'get docs select title where year = 2031');
  await a.click('#run');
  await a.waitForFunction(() => /^0 rows/.test(document.getElementById('result-count').textContent));
  await b.bringToFront();
  await b.fill('#query', 'put docs {title: "written in the other tab", category: "tech", year: 2031, embed: $1}');
  await b.click('#run');
  await a.waitForFunction(() => document.getElementById('stat-docs').textContent === '2,001');
  await a.waitForFunction(() => document.querySelector('#results tbody td:nth-child(2)')?.textContent === 'written in the other tab');
  assert.match(await a.textContent('#result-count'), /^1 row \(updated after a write\)/);

  // A closes: B takes over and goes on.
  await a.close();
  await b.waitForFunction(() => document.getElementById('tab-role').textContent === 'serves the database');
  await b.fill('#query', 'get docs where year = 2031 count');
  await b.click('#run');
  await b.waitForFunction(() => document.querySelector('#results tbody td')?.textContent === '1');
  assert.deepEqual(errors, []);
  await context.close();
});
