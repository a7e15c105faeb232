// The README's JavaScript examples, run verbatim against the packed package
// (installed in a temporary project): the Node one in Node, the Cloudflare
// Worker one in workerd. The browser one (kitfox/worker) runs in
// tests/browser/readme.test.js.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { before, test } from 'node:test';
import { promisify } from 'node:util';

import { root, startServer, within } from './helpers.js';
import { pack, project, readmeExamples, startWorkerd } from './package.js';

const run = promisify(execFile);

const examples = readmeExamples();
let tarball;
before(() => {
  ({ tarball } = pack());
});

test('the README has a Node, a browser and a Worker example', () => {
  assert.deepEqual(examples.map((e) => e.where).sort(), ['browser', 'node', 'server', 'workerd']);
});

test('the Node example runs as written', async () => {
  const { code } = examples.find((e) => e.where === 'node');
  const dir = project(tarball, { 'example.mjs': code }, 'kitfox-readme-');
  const { stdout } = await within(run(process.execPath, ['example.mjs'], { cwd: dir }), 'the README example never finished');
  // What its comment says it prints.
  assert.match(stdout, /^syntax 15 syntax error at 15: /);
  assert.ok(fs.existsSync(path.join(dir, 'notes.kfdb')));
});

test('the kitfox/http example runs as written against kitfox serve', async () => {
  const { code } = examples.find((e) => e.where === 'server');
  const dir = project(tarball, { 'example.mjs': code }, 'kitfox-readme-http-');
  const server = await startServer(path.join(dir, 'notes.kfdb'), ['--token', 'readme']);
  try {
    const env = { ...process.env, KITFOX_URL: server.url, KITFOX_TOKEN: 'readme' };
    const { stdout } = await within(run(process.execPath, ['example.mjs'], { cwd: dir, env }), 'the README example never finished');
    // What its comments say it prints.
    assert.equal(stdout, "[ 1, 2 ] hello { count: 2 }\nsyntax 10\n");
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('the Cloudflare Worker example runs as written in workerd', async () => {
  const { code } = examples.find((e) => e.where === 'workerd');
  const dir = project(tarball, { 'index.js': code, 'wrangler.json': JSON.stringify({ name: 'readme', main: 'index.js', compatibility_date: '2026-11-01' }) }, 'kitfox-readme-workerd-');
  const w = await startWorkerd(dir);
  try {
    const r = await fetch(`${w.url}/`);
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.deepEqual(body.rows.map((row) => row.title), ['edge']);
    assert.ok(body.bytes > 0);
  } finally {
    await w.stop();
  }
});
