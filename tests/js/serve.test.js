// scripts/serve.js, what `npm start` runs: it prints one URL, the demo's,
// and the root redirects there; files are served, nothing outside the root.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';

import { serve } from '../../scripts/serve.js';
import { root, within } from './helpers.js';

test('the root redirects to the home page; files are served; nothing outside the root', async () => {
  const s = await serve({ port: 0, home: '/web-demo/' });
  try {
    const r = await fetch(`${s.url}/`, { redirect: 'manual' });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/web-demo/');
    const page = await fetch(`${s.url}/web-demo/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
    assert.equal((await fetch(`${s.url}/no/such/file`)).status, 404);
    // A path that climbs out (fetch would normalise it: sent raw).
    const status = await new Promise((resolve, reject) =>
      http.get({ host: '127.0.0.1', port: s.port, path: '/../../etc/passwd' }, (res) => {
        res.resume();
        resolve(res.statusCode);
      }).on('error', reject),
    );
    assert.equal(status, 404); // resolved inside the root, where there is no such file
  } finally {
    await s.close();
  }
});

test('the command prints one URL, the demo page', async () => {
  const child = spawn(process.execPath, [path.join(root, 'scripts', 'serve.js'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    const line = await within(
      new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('\n')) resolve(out.split('\n')[0]);
        });
        child.once('exit', (code) => reject(new Error(`serve.js exited (${code}) before printing`)));
      }),
      'serve.js never printed its URL',
    );
    const urls = line.match(/https?:\/\/\S+/g);
    assert.equal(urls.length, 1, line);
    assert.match(urls[0], /^http:\/\/127\.0\.0\.1:\d+\/web-demo\/$/);
    assert.equal((await fetch(urls[0])).status, 200);
  } finally {
    child.kill();
  }
});
