// Shared by the browser tests: Debian's Chromium driven by playwright-core
// (which never downloads a browser), and the repository served on
// 127.0.0.1 by scripts/serve.js.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { serve } from '../../scripts/serve.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const results = path.join(root, 'test-results');
export const CHROMIUM = process.env.KITFOX_CHROMIUM || '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox', // runs as root here
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-gpu',
  '--no-first-run',
  '--disable-sync',
];

// The bound on every wait for an event (Playwright's waits default to 30 s):
// one that a busy 2-core CI machine cannot reach, so that a test fails only
// when what it waits for never happens. Timing is measured in bench/.
export const SAFETY_MS = 60000;

// A browser context (incognito) whose waits are bounded by SAFETY_MS.
export async function newContext(browser, options) {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(SAFETY_MS);
  return context;
}

// Starts the server and the browser; `stop()` ends both.
export async function startBrowser() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: bash scripts/setup.sh installs Debian's chromium`);
  const server = await serve({ port: 0 });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  return {
    server,
    browser,
    url: server.url,
    async stop() {
      await browser.close();
      await server.close();
    },
  };
}

// A browser with a profile directory, as a user's: OPFS is a file on disk
// there (Playwright's default contexts are incognito, whose OPFS lives in
// memory). `stop()` closes it and removes the directory.
export async function startProfile() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-profile-'));
  const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  context.setDefaultTimeout(SAFETY_MS);
  return {
    context,
    async stop() {
      await context.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A page of `context` at the test page, with the package loaded; the page's
// errors and console errors go to the test's output.
export async function openPage(context, url, pagePath = '/tests/browser/page.html') {
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/favicon/.test(m.location().url || '')) console.log(`console: ${m.text()}`);
  });
  await page.goto(url + pagePath);
  await page.waitForFunction(() => window.ready === true);
  return page;
}

export async function reload(page) {
  await page.reload();
  await page.waitForFunction(() => window.ready === true);
}
