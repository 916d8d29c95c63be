// Probe, not part of `npm run bench`: what one `GET /files` costs each of the
// processes it crosses: the client, the hop in the middle and envd. The same
// GET is written on a kept raw socket three ways, in a block of N each:
//
// - direct:  straight to envd's unix socket, no hop;
// - pipe:    through a blind pipe, a small Node process that joins each TCP
//            connection to a connection to envd's socket and reads nothing
//            (the floor of a hop written in Node: no HTTP, no routing, no pump);
// - proxied: through the server's proxy, as the SDK goes.
//
// For each block it prints wall time per request and the CPU per request of
// each process, from /proc/<pid>/stat. On a machine with two cores the three
// run one after another, so the wall time comes close to the sum of their
// CPU: whatever any of them spends, the request waits for. GAP_MS (default 0)
// waits that long before each request, as the bench's rows do while their
// baseline runs: the processes go idle in between, and each request then
// pays for waking them.
//
//   MIB=1 N=1000 node tools/bench/probes/hop-cpu.mjs
//   MIB=0.001 N=2000 node tools/bench/probes/hop-cpu.mjs   (the fixed cost per request)
//   MIB=1 N=400 GAP_MS=2 node tools/bench/probes/hop-cpu.mjs
import { Sandbox } from '@paddock/sdk';
import { execFileSync, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchNodeFlags } from '../lib.mjs';
import { envdPid, envdSocket, startServerProcess } from '../server-process.mjs';
import { rawGetter } from './raw-get.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const SIZE = Math.round(+(process.env.MIB ?? 1) * (1 << 20));
const N = +(process.env.N ?? 1000);
const GAP_MS = +(process.env.GAP_MS ?? 0);
const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU time (user + system) a process has used, in ms. */
function cpuMs(pid) {
  // The fields after the command name, which may hold spaces; utime and stime are the 14th and 15th.
  const rest = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1).split(' ');
  return (Number(rest[11]) + Number(rest[12])) * TICK_MS;
}

/** The blind pipe, in this process: every connection joined to a new one to `socketPath`. */
function servePipe(socketPath) {
  const pipe = createServer({ noDelay: true }, (client) => {
    const envd = connect(socketPath);
    client.pipe(envd).pipe(client);
    const end = () => (client.destroy(), envd.destroy());
    client.on('error', end).on('close', end);
    envd.on('error', end).on('close', end);
  });
  pipe.listen(0, '127.0.0.1', () => process.send(pipe.address().port));
  process.on('disconnect', () => process.exit(0));
}

/** Starts the blind pipe in a process of its own; resolves with its pid and port. */
async function startPipe(socketPath) {
  const child = fork(fileURLToPath(import.meta.url), ['--pipe', socketPath], { execArgv: benchNodeFlags });
  const port = await new Promise((resolve, reject) => child.once('message', resolve).once('exit', (code) => reject(new Error(`the pipe exited (${code})`))));
  return { pid: child.pid, port, close: () => child.disconnect() };
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'hop-cpu-'));
  const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
  let pipe;
  try {
    const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
    await sbx.files.write('probe.bin', randomBytes(SIZE));
    const envd = envdPid(home, sbx.sandboxId);
    const socketPath = envdSocket(home, sbx.sandboxId);
    pipe = await startPipe(socketPath);
    const proxy = new URL(server.proxyUrl);
    const target = 'GET /files?path=probe.bin&username=user HTTP/1.1\r\n';
    const ways = {
      direct: { hop: null, get: rawGetter((cb) => connect(socketPath, cb), `${target}Host: localhost\r\n\r\n`) },
      pipe: { hop: pipe.pid, get: rawGetter((cb) => connect(pipe.port, '127.0.0.1', cb), `${target}Host: localhost\r\n\r\n`) },
      proxied: {
        hop: server.pid,
        get: rawGetter((cb) => connect(Number(proxy.port), proxy.hostname, cb), `${target}Host: 49983-${sbx.sandboxId}.${proxy.host}\r\n\r\n`),
      },
    };
    console.log(`GET /files of ${SIZE} bytes, ${N} per block${GAP_MS ? `, ${GAP_MS} ms apart` : ''}; per request:`);
    for (const [name, { hop, get }] of Object.entries(ways)) {
      for (let i = 0; i < 20; i++) await get();
      const client0 = process.cpuUsage();
      const hop0 = hop ? cpuMs(hop) : 0;
      const envd0 = cpuMs(envd);
      let busy = 0;
      for (let i = 0; i < N; i++) {
        if (GAP_MS) await new Promise((resolve) => setTimeout(resolve, GAP_MS));
        const t0 = performance.now();
        if ((await get()) !== SIZE) throw new Error(`${name}: short body`);
        busy += performance.now() - t0;
      }
      const client = process.cpuUsage(client0);
      const fmt = (ms) => ms.toFixed(3).padStart(7);
      console.log(
        `${name.padEnd(8)} wall ${fmt(busy / N)} ms   CPU: client ${fmt((client.user + client.system) / 1000 / N)}  hop ${fmt(hop ? (cpuMs(hop) - hop0) / N : 0)}  envd ${fmt((cpuMs(envd) - envd0) / N)}`,
      );
    }
    for (const { get } of Object.values(ways)) get.close();
    await sbx.kill();
  } finally {
    pipe?.close();
    await server.close();
    rmSync(home, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--pipe') servePipe(process.argv[3]);
else await main();
