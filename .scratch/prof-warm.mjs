import { startServer } from '@paddock/server';
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync } from 'node:fs';
process.env.PADDOCK_TEST_CACHE ??= '/var/tmp/paddock-test-cache';
process.env.PADDOCK_IMAGES_DIR ??= `${process.env.PADDOCK_TEST_CACHE}/layers`;
process.env.PADDOCK_CACHE_DIR ??= process.env.PADDOCK_TEST_CACHE;
const KEY = 'e2b_' + 'd'.repeat(40);
const home = mkdtempSync('/tmp/paddock-prof-');
const server = await startServer({ logLevel: 'warn', apiPort: 0, proxyPort: 0, home, warmPoolSize: 3, initialApiKey: KEY, metricsIntervalMs: 60000 });
const opts = { apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl, apiKey: KEY };
const rows = [];
const N = Number(process.env.N ?? 12);
for (let i = 0; i < N; i++) {
  await server.runtime.poolReady();
  const t0 = performance.now();
  console.error(`MARK start ${i} ${Date.now()}`);
  const sbx = await Sandbox.create(opts);
  const t1 = performance.now();
  await sbx.commands.run('true');
  const t2 = performance.now();
  await sbx.commands.run('true');
  const t3 = performance.now();
  console.error(`MARK end ${i} ${Date.now()}`);
  rows.push([t1 - t0, t2 - t1, t3 - t2]);
  await sbx.kill();
}
for (const r of rows) console.log(r.map((x) => x.toFixed(1)).join('\t'));
await server.close().finally(() => server.runtime.removeEverything());
