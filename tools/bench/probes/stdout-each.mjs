// Probe, not part of `npm run bench`: the stdout row's samples one by one,
// with what the client process spent on each: its user and kernel CPU, its
// page faults and its RSS after. `commands.run` keeps the whole output for
// its result, so each sample leaves SIZE MiB of text behind until V8
// collects it; with GC=1 the probe collects it once each sample is timed,
// as the bench does (suites/sdk.mjs), and without, V8 does when it will.
//
//   node --initial-old-space-size=64 --expose-gc tools/bench/probes/stdout-each.mjs
//   GC=1 N=20 MIB=256 node --initial-old-space-size=64 --expose-gc tools/bench/probes/stdout-each.mjs
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectGarbage } from '../lib.mjs';
import { startServerProcess } from '../server-process.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const MIB = +(process.env.MIB ?? 256);
const N = +(process.env.N ?? 20);
const COLLECT = process.env.GC === '1';

const home = mkdtempSync(join(tmpdir(), 'stdout-each-'));
const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
  const rates = [];
  // The first run is a warm-up, and not printed.
  for (let i = 0; i <= N; i++) {
    const before = process.resourceUsage();
    const t = performance.now();
    let bytes = 0;
    await sbx.commands.run(`head -c ${MIB}M /dev/zero`, { onStdout: (d) => void (bytes += d.length), timeoutMs: 0 });
    const ms = performance.now() - t;
    const after = process.resourceUsage();
    if (bytes !== MIB << 20) throw new Error(`got ${bytes} bytes`);
    if (COLLECT) collectGarbage();
    if (i === 0) continue;
    const rate = MIB / (ms / 1000);
    rates.push(rate);
    const cpuMs = (field) => ((after[field] - before[field]) / 1000).toFixed(0).padStart(5);
    console.log(
      `${rate.toFixed(0).padStart(5)} MiB/s   client: user ${cpuMs('userCPUTime')} ms, kernel ${cpuMs('systemCPUTime')} ms, ${after.minorPageFault - before.minorPageFault} page faults, RSS ${process.memoryUsage().rss >> 20} MiB after`,
    );
  }
  rates.sort((a, b) => a - b);
  console.log(`median ${rates[rates.length >> 1].toFixed(0)} MiB/s, ${rates[0].toFixed(0)} to ${rates.at(-1).toFixed(0)}, ${COLLECT ? 'collected after each' : 'collected when V8 would'}`);
  await sbx.kill();
} finally {
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
