// Probe, not part of `npm run bench`: what a download through the proxy costs
// the client when read by the SDK (over envd-client's http1.ts), against the
// same GET written on a kept raw socket whose body is only counted: no parsing,
// no per-request objects, no Web stream. The two alternate; it prints p50 wall
// time and client CPU for each. The raw side is the floor of what a client
// can do; it handles only what this one request needs.
//
//   MIB=256 N=20 node tools/bench/probes/raw-download.mjs
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { startServerProcess } from '../server-process.mjs';
import { rawGetter } from './raw-get.mjs';
const KEY = 'e2b_' + 'd'.repeat(40);
const MiB = 1 << 20;
const SIZE = +(process.env.MIB ?? 256) * MiB;
const N = +(process.env.N ?? 30);
const home = mkdtempSync(join(tmpdir(), 'raw-'));
const server = await startServerProcess({
  home,
  warmPoolSize: 0,
  initialApiKey: KEY,
  metricsIntervalMs: 60000,
});
const u = new URL(server.proxyUrl);
let viaRaw;
try {
  // Not secure: the raw request carries no envd access token.
  const sbx = await Sandbox.create({
    apiUrl: server.apiUrl,
    apiKey: KEY,
    sandboxUrl: server.proxyUrl,
    secure: false,
  });
  await sbx.files.write('a.bin', randomBytes(SIZE));
  const viaSdk = async () => {
    let b = 0;
    for await (const c of await sbx.files.read('a.bin', { format: 'stream' })) b += c.length;
    return b;
  };
  viaRaw = rawGetter(
    (onConnect) => connect(+u.port, u.hostname, onConnect),
    `GET /files?path=a.bin&username=user HTTP/1.1\r\nHost: 49983-${sbx.sandboxId}.${u.host}\r\n\r\n`
  );
  if ((await viaRaw()) !== SIZE || (await viaSdk()) !== SIZE) throw new Error('size');
  const res = { sdk: [], raw: [] };
  for (let i = 0; i < N; i++)
    for (const [k, f] of i % 2
      ? [
          ['raw', viaRaw],
          ['sdk', viaSdk],
        ]
      : [
          ['sdk', viaSdk],
          ['raw', viaRaw],
        ]) {
      const c0 = process.cpuUsage();
      const t = performance.now();
      await f();
      const ms = performance.now() - t;
      const c = process.cpuUsage(c0);
      res[k].push([ms, (c.user + c.system) / 1000]);
    }
  const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  for (const k of ['sdk', 'raw'])
    console.log(
      k,
      'p50 ms',
      med(res[k].map((x) => x[0])).toFixed(2),
      'client CPU ms p50',
      med(res[k].map((x) => x[1])).toFixed(2),
      'MiB/s',
      (SIZE / MiB / (med(res[k].map((x) => x[0])) / 1000)).toFixed(0)
    );
  await sbx.kill();
} finally {
  viaRaw?.close();
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
