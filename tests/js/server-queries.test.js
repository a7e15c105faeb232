// Runs the tests/queries/*.test scripts through `kitfox serve` and the
// kitfox/http client (tests/js/query-scripts.js): the server gives the
// native answers. `reopen` restarts the server on the same file.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { KitfoxClient } from '../../js/http.js';
import { startServer, tempDir } from './helpers.js';
import { runScript, scripts } from './query-scripts.js';

const work = tempDir();

const server = {
  async open(file) {
    const s = await startServer(file, ['--sync', 'off']);
    const client = new KitfoxClient(s.url);
    return {
      queryJSON: (text, params) => client.queryJSON(text, params ?? '[]'),
      prepare: (text) => client.prepare(text),
      async close() {
        assert.equal(await s.stop(), 0, `kitfox serve failed: ${s.stderr()}`);
      },
    };
  },
};

// The server runs no transactions (its clients send one atomic write as a
// batch; server.test.js checks that begin is refused), so the script about
// them runs embedded only.
const embeddedOnly = new Set(['transactions.test']);

for (const file of scripts) {
  test(`query script ${file} through kitfox serve`, { skip: embeddedOnly.has(file) && 'transactions are embedded only' }, async () => {
    const { passed, failures } = await runScript(file, server, work);
    assert.deepEqual(failures, [], failures.join('\n'));
    assert.ok(passed > 0, 'no checks ran');
  });
}
