// Probe, not part of `npm run bench`: what one download costs, and where.
// The same GET of one file, in rotating order:
//
//   sdk   files.read through the proxy, read by the SDK (envd-client's http1.ts)
//   raw   the GET written on a kept raw socket to the proxy, its body only counted
//   envd  the same raw GET straight to the sandbox's envd socket, past the proxy
//
// The raw client is the floor of what a client can do (no parsing beyond the
// head, no per-request objects, no Web stream), so sdk − raw is what the SDK
// adds and raw − envd what the proxy adds. It prints each one's p50 wall time
// and client CPU. Run it at a few sizes to tell a fixed cost per request from
// a cost per byte: at 1 KiB, 64 KiB and 1 MiB on the 2-core host, the proxy
// added about 0.4 ms per request plus 0.45 ms per MiB, and the SDK a flat
// 0.46 ms.
//
//   MIB=256 N=20 node tools/bench/probes/raw-download.mjs
//   BYTES=1024 N=400 node tools/bench/probes/raw-download.mjs
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { envdSocket, startServerProcess } from '../server-process.mjs';
import { rawGetter } from './raw-get.mjs';
const KEY = 'e2b_' + 'd'.repeat(40);
const MiB = 1 << 20;
const SIZE = process.env.BYTES ? +process.env.BYTES : +(process.env.MIB ?? 256) * MiB;
const N = +(process.env.N ?? 30);
const home = mkdtempSync(join(tmpdir(), 'raw-'));
const server = await startServerProcess({
  home,
  warmPoolSize: 0,
  initialApiKey: KEY,
  metricsIntervalMs: 60000,
});
const u = new URL(server.proxyUrl);
const getters = [];
try {
  // Not secure: the raw requests carry no envd access token.
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
  await sbx.files.write('a.bin', randomBytes(SIZE));
  const target = 'GET /files?path=a.bin&username=user HTTP/1.1';
  const raw = rawGetter((onConnect) => connect(+u.port, u.hostname, onConnect), `${target}\r\nHost: 49983-${sbx.sandboxId}.${u.host}\r\n\r\n`);
  const envd = rawGetter((onConnect) => connect(envdSocket(home, sbx.sandboxId), onConnect), `${target}\r\nHost: envd\r\n\r\n`);
  getters.push(raw, envd);
  const paths = {
    async sdk() {
      let bytes = 0;
      for await (const c of await sbx.files.read('a.bin', { format: 'stream' })) bytes += c.length;
      return bytes;
    },
    raw,
    envd,
  };
  const names = Object.keys(paths);
  for (const name of names) if ((await paths[name]()) !== SIZE) throw new Error(`${name}: wrong size`);
  const res = Object.fromEntries(names.map((k) => [k, { ms: [], cpu: [] }]));
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length];
      const c0 = process.cpuUsage();
      const t = performance.now();
      await paths[name]();
      res[name].ms.push(performance.now() - t);
      const c = process.cpuUsage(c0);
      res[name].cpu.push((c.user + c.system) / 1000);
    }
  }
  const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  console.log(`GET of ${SIZE} bytes, p50 of ${N} each`);
  for (const name of names) {
    const ms = med(res[name].ms);
    console.log(`${name.padEnd(5)} ${ms.toFixed(2)} ms  client CPU ${med(res[name].cpu).toFixed(2)} ms  ${(SIZE / MiB / (ms / 1000)).toFixed(0)} MiB/s`);
  }
  await sbx.kill();
} finally {
  for (const g of getters) g.close();
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
