// The packed package (npm pack, installed in a temporary project) bundled
// into a small app (tests/browser/fixtures/bundled-app) by esbuild
// (--bundle --platform=browser), Vite 8 and webpack 5, each with no warning
// at all, and each app run in Chromium: a database in memory on the page,
// and one over OPFS in kitfox/worker's worker, opened twice.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { serve } from '../../scripts/serve.js';
import { pack, project } from '../js/package.js';
import { newContext, root, startBrowser } from './helpers.js';

const APP = path.join(root, 'tests/browser/fixtures/bundled-app');
const expected = { platform: 'web', near: 'a', match: 'b', error: 'syntax', worker: 'w', workerCount: 1 };

let tarball;
let env;
before(async () => {
  ({ tarball } = pack());
  env = await startBrowser();
});
after(async () => {
  await env?.stop();
});

// Serves `dir` and runs the app's page in a fresh context: what it saw.
async function runApp(dir) {
  const server = await serve({ port: 0, root: dir });
  const context = await newContext(env.browser);
  try {
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
    await page.goto(`${server.url}/index.html`);
    await page.waitForFunction(() => window.result !== undefined);
    const result = await page.evaluate(() => window.result);
    assert.deepEqual(problems, []);
    return result;
  } finally {
    await context.close();
    await server.close();
  }
}

// The .wasm files a build emitted: one (the glue's own reference to it
// must not bring in a second copy).
function wasmFiles(dir) {
  return fs.readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith('.wasm')).length;
}

function app(extra = {}) {
  const files = {};
  for (const f of ['index.html', 'main.js', 'options.js']) files[f] = fs.readFileSync(path.join(APP, f), 'utf8');
  return project(tarball, { ...files, ...extra }, 'kitfox-bundle-');
}

describe('bundlers build the app with no warnings, and it runs', () => {
  test('esbuild --bundle --platform=browser', async () => {
    const esbuild = await import('esbuild');
    const dir = app({ 'options.js': fs.readFileSync(path.join(APP, 'options.esbuild.js'), 'utf8') });
    const out = path.join(dir, 'out');
    const r = await esbuild.build({
      absWorkingDir: dir,
      entryPoints: { main: 'main.js', 'worker-main': 'kitfox/worker-main' },
      bundle: true,
      platform: 'browser',
      format: 'esm',
      outdir: out,
      loader: { '.wasm': 'file' },
      logLevel: 'silent',
    });
    assert.deepEqual(r.warnings, []);
    assert.deepEqual(r.errors, []);
    assert.equal(wasmFiles(out), 1);
    fs.copyFileSync(path.join(dir, 'index.html'), path.join(out, 'index.html'));
    assert.deepEqual(await runApp(out), expected);
  });

  test('Vite 8', async () => {
    const { build, createLogger } = await import('vite');
    const dir = app();
    const warnings = [];
    const logger = createLogger('warn', { allowClearScreen: false });
    logger.warn = (msg) => warnings.push(msg);
    logger.warnOnce = (msg) => warnings.push(msg);
    await build({
      root: dir,
      configFile: false,
      logLevel: 'warn',
      customLogger: logger,
      build: { outDir: path.join(dir, 'out'), rollupOptions: { onwarn: (w) => warnings.push(String(w.message ?? w)) } },
    });
    assert.deepEqual(warnings, []);
    assert.equal(wasmFiles(path.join(dir, 'out')), 1);
    assert.deepEqual(await runApp(path.join(dir, 'out')), expected);
  });

  test('webpack 5', async () => {
    const { default: webpack } = await import('webpack');
    const dir = app();
    const out = path.join(dir, 'out');
    const stats = await new Promise((resolve, reject) =>
      webpack(
        {
          mode: 'production',
          context: dir,
          entry: './main.js',
          output: { path: out, filename: 'main.js' },
          // The wasm module is 540 KiB: over webpack's default 244 KiB hint.
          performance: { maxAssetSize: 1 << 20, maxEntrypointSize: 1 << 20 },
        },
        (err, s) => (err ? reject(err) : resolve(s)),
      ),
    );
    const info = stats.toJson({ all: false, warnings: true, errors: true });
    assert.deepEqual(info.errors, []);
    assert.deepEqual(info.warnings.map((w) => w.message), []);
    assert.equal(wasmFiles(out), 1);
    fs.writeFileSync(path.join(out, 'index.html'), fs.readFileSync(path.join(dir, 'index.html'), 'utf8'));
    assert.deepEqual(await runApp(out), expected);
  });
});
