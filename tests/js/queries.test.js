// Runs every tests/queries/*.test script through the WASM build
// (tests/js/query-scripts.js): the answers of the native runner.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Kitfox } from '../../js/index.js';
import { tempDir } from './helpers.js';
import { runScript, scripts } from './query-scripts.js';

const work = tempDir();
const wasm = { open: (file) => Kitfox.open(file, { sync: 'off' }) };

for (const file of scripts) {
  test(`query script ${file}`, async () => {
    const { passed, failures } = await runScript(file, wasm, work);
    assert.deepEqual(failures, [], failures.join('\n'));
    assert.ok(passed > 0, 'no checks ran');
  });
}
