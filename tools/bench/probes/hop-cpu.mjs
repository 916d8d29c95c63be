// Probe, not part of `npm run bench`: what one `GET /files` costs each of the
// three processes it crosses: the client, the server (whose proxy relays it)
// and envd. The same GET is written on a kept raw socket, first straight to
// envd's unix socket, then through the proxy, in a block of N each; for each
// block it prints wall time per request and the CPU per request of each
// process, from /proc/<pid>/stat. On a machine with two cores the three run
// one after another, so the wall time comes close to the sum of their CPU:
// whatever any of them spends, the request waits for.
//
//   MIB=1 N=1000 node tools/bench/probes/hop-cpu.mjs
//   MIB=0.001 N=2000 node tools/bench/probes/hop-cpu.mjs   (the fixed cost per request)
import { Sandbox } from '@paddock/sdk';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envdPid, startServerProcess } from '../server-process.mjs';
import { rawGetter } from './raw-get.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const SIZE = Math.round(+(process.env.MIB ?? 1) * (1 << 20));
const N = +(process.env.N ?? 1000);
const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU time (user + system) a process has used, in ms. */
function cpuMs(pid) {
  // The fields after the command name, which may hold spaces; utime and stime are the 14th and 15th.
  const rest = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1).split(' ');
  return (Number(rest[11]) + Number(rest[12])) * TICK_MS;
}

const home = mkdtempSync(join(tmpdir(), 'hop-cpu-'));
const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
  await sbx.files.write('probe.bin', randomBytes(SIZE));
  const envd = envdPid(home, sbx.sandboxId);
  const proxy = new URL(server.proxyUrl);
  const target = 'GET /files?path=probe.bin&username=user HTTP/1.1\r\n';
  const ways = {
    direct: rawGetter((cb) => connect(join(home, 'runtime', 'sandboxes', sbx.sandboxId, 'run', 'envd.sock'), cb), `${target}Host: localhost\r\n\r\n`),
    proxied: rawGetter((cb) => connect(Number(proxy.port), proxy.hostname, cb), `${target}Host: 49983-${sbx.sandboxId}.${proxy.host}\r\n\r\n`),
  };
  console.log(`GET /files of ${SIZE} bytes, ${N} per block; per request:`);
  for (const [name, get] of Object.entries(ways)) {
    for (let i = 0; i < 20; i++) await get();
    const client0 = process.cpuUsage();
    const server0 = cpuMs(server.pid);
    const envd0 = cpuMs(envd);
    const t0 = performance.now();
    for (let i = 0; i < N; i++) if ((await get()) !== SIZE) throw new Error(`${name}: short body`);
    const wall = (performance.now() - t0) / N;
    const client = process.cpuUsage(client0);
    const fmt = (ms) => ms.toFixed(3).padStart(7);
    console.log(
      `${name.padEnd(8)} wall ${fmt(wall)} ms   CPU: client ${fmt((client.user + client.system) / 1000 / N)}  server ${fmt((cpuMs(server.pid) - server0) / N)}  envd ${fmt((cpuMs(envd) - envd0) / N)}`,
    );
  }
  for (const get of Object.values(ways)) get.close();
  await sbx.kill();
} finally {
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
