// Probe, not part of `npm run bench`: what a command's stdout costs each of
// the processes it crosses on its way to the SDK: the command itself, envd,
// the server (whose proxy relays it) and the client. Runs `head -c SIZE
// /dev/zero` N times through `commands.run` and prints, per MiB, the wall
// time and the CPU of each, from /proc/<pid>/stat (the command's CPU is what
// envd's children used, cutime + cstime).
//
//   MIB=256 N=5 node tools/bench/probes/stdout-cpu.mjs
import { Sandbox } from '@paddock/sdk';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envdPid, startServerProcess } from '../server-process.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const MIB = +(process.env.MIB ?? 256);
const N = +(process.env.N ?? 5);
const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU time of a process, in ms: its own, and that of the children it has waited for. */
function cpu(pid) {
  const rest = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1).split(' ');
  return { own: (Number(rest[11]) + Number(rest[12])) * TICK_MS, children: (Number(rest[13]) + Number(rest[14])) * TICK_MS };
}

const home = mkdtempSync(join(tmpdir(), 'stdout-cpu-'));
const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
  const envd = envdPid(home, sbx.sandboxId);
  const run = async () => {
    let bytes = 0;
    let chunks = 0;
    await sbx.commands.run(`head -c ${MIB}M /dev/zero`, { onStdout: (d) => { bytes += d.length; chunks += 1; }, timeoutMs: 0 });
    if (bytes !== MIB << 20) throw new Error(`got ${bytes} bytes`);
    return chunks;
  };
  await run();
  const fmt = (ms) => (ms / (N * MIB)).toFixed(3).padStart(7);
  for (let block = 0; block < 3; block++) {
    const client0 = process.cpuUsage();
    const server0 = cpu(server.pid).own;
    const envd0 = cpu(envd);
    const t0 = performance.now();
    let chunks = 0;
    for (let i = 0; i < N; i++) chunks += await run();
    const wall = performance.now() - t0;
    const client = process.cpuUsage(client0);
    const envd1 = cpu(envd);
    console.log(
      `per MiB: wall ${fmt(wall)} ms (${((N * MIB) / (wall / 1000)).toFixed(0)} MiB/s, ${(chunks / N).toFixed(0)} chunks a run)   CPU: head ${fmt(envd1.children - envd0.children)}  envd ${fmt(envd1.own - envd0.own)}  server ${fmt(cpu(server.pid).own - server0)}  client ${fmt((client.user + client.system) / 1000)}`,
    );
  }
  await sbx.kill();
} finally {
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
