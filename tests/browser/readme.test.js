// The README's browser example (kitfox/worker), run verbatim in the browser
// against the packed package (installed in a temporary project, mapped with
// an import map as a bundler would resolve it). The Node and Worker
// examples run in tests/js/readme.test.js.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { serve } from '../../scripts/serve.js';
import { pack, project, readmeExamples } from '../js/package.js';
import { newContext, startBrowser } from './helpers.js';

let env;
before(async () => {
  env = await startBrowser();
});
after(async () => {
  await env?.stop();
});

test('the browser example runs as written', async () => {
  const { code } = readmeExamples().find((e) => e.where === 'browser');
  const { tarball } = pack();
  const dir = project(tarball, {
    'example.js': code,
    'index.html': `<!doctype html>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<script type="importmap">{"imports": {"kitfox": "/node_modules/kitfox/js/browser.js", "kitfox/worker": "/node_modules/kitfox/js/worker.js"}}</script>
<script type="module">
  import('./example.js').then(() => (window.done = 'ok'), (e) => (window.done = String(e && e.stack ? e.stack : e)));
</script>
`,
  });
  const server = await serve({ port: 0, root: dir });
  const context = await newContext(env.browser);
  try {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/index.html`);
    await page.waitForFunction(() => window.done !== undefined);
    assert.equal(await page.evaluate(() => window.done), 'ok');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await server.close();
  }
});
