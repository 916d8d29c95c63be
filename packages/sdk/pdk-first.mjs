import { startServer } from '@paddock/server';
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync } from 'node:fs';
const home = mkdtempSync('/tmp/pdk-first-');
const KEY = 'e2b_' + 'ab'.repeat(20);
const server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 1, initialApiKey: KEY, logLevel: 'warn', metricsIntervalMs: 60000 });
const opts = { apiKey: KEY, apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl };
const rows = [];
for (let i = 0; i < 12; i++) {
  await server.runtime.poolReady();
  await new Promise(r => setTimeout(r, 300));
  const t0 = performance.now();
  const s = await Sandbox.create(opts);
  const t1 = performance.now();
  await s.commands.run('true');
  const t2 = performance.now();
  await s.commands.run('true');
  const t3 = performance.now();
  await s.files.exists('/tmp');
  const t4 = performance.now();
  await s.files.exists('/tmp');
  const t5 = performance.now();
  rows.push([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4]);
  await s.kill();
}
const med = (k) => rows.map(r => r[k]).sort((a, b) => a - b)[6].toFixed(1);
console.log('create', med(0), 'cmd1', med(1), 'cmd2', med(2), 'files1', med(3), 'files2', med(4));
await server.close(); await server.runtime.removeEverything();
