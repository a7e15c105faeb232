// Shared by the browser tests: Debian's Chromium driven by playwright-core
// (which never downloads a browser), or, with KITFOX_BROWSER=firefox,
// Debian's firefox-esr driven by puppeteer-core over WebDriver BiDi (behind
// a small adapter with the Playwright calls the tests make); the
// repository served on 127.0.0.1 by scripts/serve.js.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { serve } from '../../scripts/serve.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const results = path.join(root, 'test-results');
export const CHROMIUM = process.env.KITFOX_CHROMIUM || '/usr/bin/chromium';
export const FIREFOX = process.env.KITFOX_FIREFOX || '/usr/bin/firefox-esr';
// The browser the tests drive: 'chromium' (default) or 'firefox'.
export const BROWSER = process.env.KITFOX_BROWSER || 'chromium';
if (BROWSER !== 'chromium' && BROWSER !== 'firefox') throw new Error(`KITFOX_BROWSER must be chromium or firefox, got ${BROWSER}`);

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
  if (BROWSER === 'firefox') return firefoxContext(await browser.createBrowserContext(), options);
  const context = await browser.newContext(options);
  context.setDefaultTimeout(SAFETY_MS);
  return context;
}

// Starts the server and the browser; `stop()` ends both.
export async function startBrowser() {
  const server = await serve({ port: 0 });
  const browser = await launch();
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

async function launch(userDataDir) {
  if (BROWSER === 'firefox') {
    if (!fs.existsSync(FIREFOX)) throw new Error(`${FIREFOX} is missing: bash scripts/setup.sh installs Debian's firefox-esr`);
    const { default: puppeteer } = await import('puppeteer-core');
    return puppeteer.launch({
      browser: 'firefox',
      protocol: 'webDriverBiDi',
      executablePath: FIREFOX,
      headless: true,
      userDataDir,
      protocolTimeout: SAFETY_MS * 2,
    });
  }
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: bash scripts/setup.sh installs Debian's chromium`);
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

// A browser with a profile directory, as a user's: OPFS is a file on disk
// there (Playwright's default contexts are incognito, whose OPFS lives in
// memory). `stop()` closes it and removes the directory.
export async function startProfile() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kitfox-profile-'));
  let context;
  let close;
  if (BROWSER === 'firefox') {
    const browser = await launch(dir);
    context = firefoxContext(browser.defaultBrowserContext(), {}, false);
    close = () => browser.close();
  } else {
    context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
    context.setDefaultTimeout(SAFETY_MS);
    close = () => context.close();
  }
  return {
    context,
    async stop() {
      await close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// Firefox: a Puppeteer browser context behind the Playwright calls the
// tests make (newPage, close; on a page: goto, reload, bringToFront, evaluate,
// waitForFunction(fn, arg, {timeout}), waitForSelector, the element calls
// of the demo test, on('pageerror' | 'console')).
function firefoxContext(context, options = {}, closable = true) {
  return {
    async newPage() {
      const page = await context.newPage();
      page.setDefaultTimeout(SAFETY_MS);
      if (options.viewport) await page.setViewport(options.viewport);
      return new FirefoxPage(page);
    },
    close: () => (closable ? context.close() : Promise.resolve()),
  };
}

// Playwright's `:has-text("x")` is Puppeteer's `::-p-text(x)`.
const selector = (s) => s.replace(/:has-text\("([^"]*)"\)/g, '::-p-text($1)');

class FirefoxPage {
  constructor(page) {
    this.page = page;
  }
  goto(url) {
    return this.page.goto(url);
  }
  reload() {
    return this.page.reload();
  }
  // A background tab renders nothing, so Puppeteer's clicks (which wait for
  // a visible element) would wait for ever there.
  bringToFront() {
    return this.page.bringToFront();
  }
  close() {
    return this.page.close();
  }
  evaluate(fn, arg) {
    return arg === undefined ? this.page.evaluate(fn) : this.page.evaluate(fn, arg);
  }
  waitForFunction(fn, arg, options = {}) {
    const args = arg === undefined || arg === null ? [] : [arg];
    return this.page.waitForFunction(fn, { timeout: options.timeout ?? SAFETY_MS }, ...args);
  }
  waitForSelector(s) {
    return this.page.waitForSelector(selector(s));
  }
  click(s) {
    return this.page.locator(selector(s)).click();
  }
  fill(s, value) {
    return this.page.locator(selector(s)).fill(value);
  }
  async press(s, keys) {
    await this.page.focus(selector(s));
    const parts = keys.split('+');
    for (const k of parts) await this.page.keyboard.down(k);
    for (const k of parts.reverse()) await this.page.keyboard.up(k);
  }
  selectOption(s, value) {
    return this.page.select(selector(s), value);
  }
  textContent(s) {
    return this.page.$eval(selector(s), (e) => e.textContent);
  }
  getAttribute(s, name) {
    return this.page.$eval(selector(s), (e, n) => e.getAttribute(n), name);
  }
  isHidden(s) {
    return this.page.$eval(selector(s), (e) => e.hidden || getComputedStyle(e).display === 'none' || getComputedStyle(e).visibility === 'hidden');
  }
  $$eval(s, fn) {
    return this.page.$$eval(selector(s), fn);
  }
  locator(s) {
    return { count: async () => (await this.page.$$(selector(s))).length };
  }
  screenshot(options) {
    return this.page.screenshot(options);
  }
  on(event, f) {
    if (event === 'pageerror') this.page.on('pageerror', (e) => f(e));
    else if (event === 'console') this.page.on('console', (m) => f({ type: () => m.type(), text: () => m.text(), location: () => m.location() ?? {} }));
    else throw new Error(`the Firefox adapter has no page event '${event}'`);
  }
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
