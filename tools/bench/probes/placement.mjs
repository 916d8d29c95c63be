// Probe, not part of `npm run bench`: how much the CPU each process runs on
// moves the 1 MiB transfer rows. On two cores the client (this process), the
// server, envd and the baseline process share two CPUs, and where the
// scheduler puts them holds for seconds at a time. The probe pins them
// (taskset, every thread) in a few fixed layouts, in turn, and for each one
// prints the ratio of 1 MiB files.write and files.read through @paddock/sdk
// to 1 MiB of loopback TCP, measured as the bench measures it (throughputPair). It runs as the bench's suites run (benchNodeFlags). Needs taskset
// (util-linux) and root, as the server does.
//
//   N=150 ROUNDS=2 node --initial-old-space-size=64 tools/bench/probes/placement.mjs
import { Sandbox } from '@paddock/sdk';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBaselineProcess } from '../baseline-process.mjs';
import { row, settleDisk, throughputPair } from '../lib.mjs';
import { envdPid, startServerProcess } from '../server-process.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const MiB = 1 << 20;
const N = +(process.env.N ?? 150);
const ROUNDS = +(process.env.ROUNDS ?? 2);

/** Which CPUs each process may run on, per layout ("a+b|c+d": a and b on CPU 0, c and d on CPU 1). */
const layouts = {
  'as the scheduler likes': { client: '0,1', server: '0,1', envd: '0,1', base: '0,1' },
  'client+server|envd+baseline': { client: '0', server: '0', envd: '1', base: '1' },
  'client+envd|server+baseline': { client: '0', server: '1', envd: '0', base: '1' },
  'client+baseline|server+envd': { client: '0', server: '1', envd: '1', base: '0' },
};

const pin = (pid, cpus) => execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });

const base = await startBaselineProcess();
const home = mkdtempSync(join(tmpdir(), 'placement-'));
const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, timeoutMs: 3600_000 });
  // The baseline process is the one child of ours that runs baseline-process.mjs.
  const pids = {
    client: process.pid,
    server: server.pid,
    envd: envdPid(home, sbx.sandboxId),
    base: Number(execFileSync('pgrep', ['-P', String(process.pid), '-f', 'baseline-process']).toString().trim()),
  };
  console.log('pids', pids);
  const payload = randomBytes(MiB);
  const write = async () => {
    await sbx.files.write('probe.bin', payload);
    return MiB;
  };
  const read = async () => {
    let bytes = 0;
    for await (const c of await sbx.files.read('probe.bin', { format: 'stream' })) bytes += c.length;
    if (bytes !== MiB) throw new Error(`read ${bytes} bytes`);
    return bytes;
  };
  const tcp = () => base.loopbackTcp(MiB);
  await write();
  settleDisk();
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, layout] of Object.entries(layouts)) {
        for (const [who, cpus] of Object.entries(layout)) pin(pids[who], cpus);
        const ratios = [];
        for (const fn of [write, read]) {
          const [subject, baseline] = await throughputPair(fn, tcp, { warmup: 5, iterations: N });
          ratios.push(row({ suite: 'probe', name: fn.name, unit: 'MiB/s', value: subject, baseline, lowerIsBetter: false }).ratio.toFixed(3));
        }
        console.log(`round ${round}  ${name.padEnd(30)} write ${ratios[0]}  read ${ratios[1]}`);
      }
    }
  } finally {
    for (const pid of Object.values(pids)) pin(pid, '0,1');
    await sbx.kill();
  }
} finally {
  await server.close();
  rmSync(home, { recursive: true, force: true });
  await base.close();
}
