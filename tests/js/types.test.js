// The package's TypeScript declarations, from the packed tarball installed
// in a temporary project: tsc checks tests/js/fixtures/types/example.ts
// under the `nodenext`, `bundler` and `node` (node10) module resolutions,
// with skipLibCheck off (the declarations compile) and checks that fail if
// a type turned into `any`.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { before, test } from 'node:test';
import { promisify } from 'node:util';

import { root, within } from './helpers.js';
import { bins, pack, project } from './package.js';

const run = promisify(execFile);

const resolutions = {
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext' },
  bundler: { module: 'esnext', moduleResolution: 'bundler' },
  node: { module: 'esnext', moduleResolution: 'node' },
};

let dir;
before(() => {
  const { tarball } = pack();
  const files = { 'example.ts': fs.readFileSync(path.join(root, 'tests/js/fixtures/types/example.ts'), 'utf8') };
  for (const [name, options] of Object.entries(resolutions)) {
    files[`tsconfig.${name}.json`] = JSON.stringify({
      compilerOptions: { ...options, target: 'es2022', lib: ['es2022', 'dom'], strict: true, noEmit: true, skipLibCheck: false, types: [] },
      files: ['example.ts'],
    });
  }
  dir = project(tarball, files, 'kitfox-types-');
});

for (const name of Object.keys(resolutions)) {
  test(`tsc, moduleResolution ${name}`, async () => {
    const r = await within(
      run(process.execPath, [bins.tsc, '-p', `tsconfig.${name}.json`], { cwd: dir }).then(
        () => ({ ok: true, out: '' }),
        (e) => ({ ok: false, out: `${e.stdout}${e.stderr}` }),
      ),
      'tsc never finished',
    );
    assert.equal(r.out, '');
    assert.ok(r.ok);
  });
}

test('the example fails when a declaration is any', async () => {
  // The same program against declarations whose worker types do not resolve
  // (as js/worker.d.ts's extensionless import did under nodenext): the
  // checks must catch it even with skipLibCheck.
  const broken = path.join(dir, 'node_modules/kitfox/js/worker.d.ts');
  const text = fs.readFileSync(broken, 'utf8');
  fs.writeFileSync(broken, text.replaceAll("'./kitfox.js'", "'./no-such-file.js'"));
  try {
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tsconfig.nodenext.json'), 'utf8'));
    cfg.compilerOptions.skipLibCheck = true;
    fs.writeFileSync(path.join(dir, 'tsconfig.skip.json'), JSON.stringify(cfg));
    const r = await run(process.execPath, [bins.tsc, '-p', 'tsconfig.skip.json'], { cwd: dir }).then(
      () => ({ ok: true, out: '' }),
      (e) => ({ ok: false, out: `${e.stdout}` }),
    );
    assert.equal(r.ok, false);
    assert.match(r.out, /example\.ts/);
  } finally {
    fs.writeFileSync(broken, text);
  }
});
