// Closing the server while a create is still booting and its client has gone
// (a Ctrl-C reaches the client and the server together): the create does not
// end as an internal error about a closed database, and the sandbox it booted
// is not left behind.
import { existsSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { auditLog } from '../../../tools/testing/log-audit.mjs';
import { API_KEY, eventually, sleep, testServer } from './harness.js';

test('a create booting when the server closes, whose client went away, is undone without an internal error', async () => {
  const t = await testServer();
  try {
    const sandboxes = join(t.home, 'runtime', 'sandboxes');
    const req = request(`${t.server.apiUrl}/v2/sandboxes`, { method: 'POST', headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' } });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ templateID: 'base', timeout: 60 }));
    await eventually(() => existsSync(sandboxes) && readdirSync(sandboxes).length > 0, 'a boot under way');
    req.destroy();
    await t.server.close();
    // The request's handler goes on after the close, and removes the sandbox once its boot ended.
    await eventually(() => readdirSync(sandboxes).length === 0, 'the booted sandbox removed', 30_000);
    // The handler answers (to no one) right after the removal.
    await sleep(500);
    // Nothing was logged as an error: not the create, not anything it left to background work.
    expect(auditLog(t.server.config.logFile!).filter((line) => Number(line.level) >= 50)).toEqual([]);
  } finally {
    await t.teardown();
  }
});
