// What `npm pack` puts in the package: everything the entry points load
// (followed import by import from package.json's exports), the
// declarations, README, LICENSE and the docs the README links to; no tests,
// no sources, no build trees. And package.json says what a user needs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, test } from 'node:test';

import { root } from './helpers.js';
import { pack } from './package.js';

const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
let files;
before(() => {
  files = new Set(pack().files);
});

// Every file path an exports / imports entry names, at any depth.
function targets(entry, out = []) {
  if (typeof entry === 'string') out.push(path.posix.normalize(entry));
  else if (entry && typeof entry === 'object') for (const v of Object.values(entry)) targets(v, out);
  return out;
}

// The relative files a module loads: static imports and re-exports,
// side-effect imports, and `new URL('...', import.meta.url)` assets.
function references(file) {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const out = [];
  const patterns = [/\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]/g, /\bimport\s+['"](\.{1,2}\/[^'"]+)['"]/g, /new URL\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*,\s*import\.meta\.url/g];
  for (const re of patterns) for (const m of text.matchAll(re)) out.push(path.posix.join(path.posix.dirname(file), m[1]));
  for (const m of text.matchAll(/\bfrom\s+['"](#[^'"]+)['"]/g)) out.push(...targets(pkg.imports[m[1]]));
  return out;
}

test('the package holds everything its entry points load', () => {
  const seen = new Set();
  const todo = targets(pkg.exports).filter((f) => f !== 'package.json');
  while (todo.length) {
    const f = todo.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    assert.ok(files.has(f), `${f} is loaded by the package but not in it`);
    if (/\.(js|mjs|d\.ts)$/.test(f)) todo.push(...references(f));
  }
  // Reached from the entries: both glues, the module, the declarations.
  for (const f of ['dist/kitfox-core.js', 'dist/kitfox-core.web.js', 'dist/kitfox-core.wasm', 'js/kitfox.d.ts', 'js/worker.d.ts', 'js/workerd.js'])
    assert.ok(seen.has(f), `${f} is not reached from package.json's exports`);
  for (const f of ['package.json', 'README.md', 'LICENSE', pkg.main.replace(/^\.\//, ''), pkg.types.replace(/^\.\//, '')]) assert.ok(files.has(f), `${f} is missing`);
});

test('no tests, sources or build trees', () => {
  const bad = [...files].filter(
    (f) =>
      /^(tests|core|native|wasm|bench|scripts|web-demo|examples|build[^/]*|node_modules|test-results)\//.test(f) ||
      /\.(cpp|cc|h|hpp|ts|map|kfdb)$/.test(f.replace(/\.d\.ts$/, '.js')) ||
      /\.test\.js$/.test(f),
  );
  assert.deepEqual(bad, []);
  // Nothing in it that nothing uses: js/, dist/'s three, the docs.
  const other = [...files].filter((f) => !/^(js\/|docs\/[^/]+\.md$|dist\/kitfox-core(\.web)?\.js$|dist\/kitfox-core\.wasm$|package\.json$|README\.md$|LICENSE$)/.test(f));
  assert.deepEqual(other, []);
});

// Links into the repository's sources and benchmark records, which the
// package does not carry: they work on the repository's pages only.
const REPOSITORY_ONLY = /^(\.\.\/)?(core|bench)\//;

test('relative links in the packed documents lead to packed files', () => {
  const broken = [];
  for (const f of files) {
    if (!f.endsWith('.md')) continue;
    const text = fs.readFileSync(path.join(root, f), 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1].split('#')[0];
      if (link === '' || /^[a-z]+:/i.test(link) || REPOSITORY_ONLY.test(link)) continue;
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(f), link));
      if (!files.has(target)) broken.push(`${f}: ${m[1]}`);
    }
  }
  assert.deepEqual(broken, []);
});

test('package.json: engines, license, exports with types first', () => {
  assert.equal(pkg.license, 'MIT');
  assert.match(fs.readFileSync(path.join(root, 'LICENSE'), 'utf8'), /MIT License/);
  // require() of an ES module, which CommonJS users need, is there from 20.19.
  assert.equal(pkg.engines.node, '>=20.19');
  for (const [key, entry] of Object.entries(pkg.exports)) {
    if (typeof entry === 'object') assert.equal(Object.keys(entry)[0], 'types', `exports['${key}'] must list types first`);
  }
  // Conditions are matched in order: workerd before node and browser (wrangler
  // passes workerd, worker and browser), default last.
  assert.deepEqual(Object.keys(pkg.exports['.']), ['types', 'workerd', 'node', 'browser', 'default']);
  // Every devDependency is pinned to an exact version.
  for (const [name, v] of Object.entries(pkg.devDependencies)) assert.match(v, /^\d+\.\d+\.\d+(-[\w.]+)?$/, `${name}@${v} is not pinned`);
});
