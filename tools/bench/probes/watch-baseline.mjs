// Probe, not part of `npm run bench`: does the watch row's baseline (a write
// and its event through a small local HTTP service, localWatch in
// baseline-process.mjs) move with the row from one moment to the next? The
// row's own p50 moved by 12 to 39% between full runs, with how soon this
// machine runs a woken thread. The probe takes BLOCKS blocks of N pairs
// (watch through @paddock/sdk, then the baseline, in alternating order), and
// before each block either idles for 2 s, streams 200 MiB of stdout from the
// sandbox, or spins this thread for half a second, so that the blocks meet
// the machine in different states. It prints each block's medians and paired
// ratio, and at the end the spread (sd of the logs) of the block medians of
// each, and of the ratio. On 2026-11-23, 24 blocks of 16: 0.171 for the
// watch, 0.168 for the baseline, 0.143 for their ratio (and 0.163, 0.169
// and 0.075 in a first version of the probe with a service of its own). So
// from block to block the two move together only in part; what the pairing
// cancels is mostly a whole run's shift (see the watch in suites/sdk.mjs).
//
//   BLOCKS=24 N=16 node --initial-old-space-size=64 tools/bench/probes/watch-baseline.mjs
import { Sandbox } from '@paddock/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBaselineProcess } from '../baseline-process.mjs';
import { serverInHome } from '../server-process.mjs';

const BLOCKS = +(process.env.BLOCKS ?? 24);
const N = +(process.env.N ?? 16);
const KEY = 'e2b_' + 'd'.repeat(40);

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const logSpread = (a) => {
  const l = a.map(Math.log);
  const mean = l.reduce((x, y) => x + y) / l.length;
  return Math.sqrt(l.reduce((x, y) => x + (y - mean) ** 2, 0) / (l.length - 1));
};
const timed = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

const base = await startBaselineProcess();
const localDir = mkdtempSync(join(tmpdir(), 'paddock-bench-probe-local-'));
const { server, close } = await serverInHome('paddock-bench-probe-', { warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, timeoutMs: 3600_000 });
  await sbx.commands.run('mkdir -p watched');
  let waiting = null;
  const handle = await sbx.files.watchDir(
    'watched',
    (e) => {
      if (waiting && e.name === waiting.name && e.type === 'write') waiting.resolve();
    },
    { timeoutMs: 0 },
  );
  let written = 0;
  const watch = async () => {
    const name = `w${written++}`;
    const seen = new Promise((resolve) => (waiting = { name, resolve }));
    await sbx.files.write(`watched/${name}`, 'x');
    await seen;
  };
  const local = await base.localWatch(join(localDir, 'watched'));
  const blocks = [];
  for (let b = 0; b < BLOCKS; b++) {
    if (b % 3 === 0) await new Promise((r) => setTimeout(r, 2000));
    else if (b % 3 === 1) await sbx.commands.run('head -c 200M /dev/zero > /dev/null');
    else for (const t = Date.now(); Date.now() - t < 500; );
    await watch();
    await local.sample();
    const w = [];
    const l = [];
    const r = [];
    for (let i = 0; i < N; i++) {
      let a;
      let c;
      if (i % 2) {
        c = await timed(() => local.sample());
        a = await timed(watch);
      } else {
        a = await timed(watch);
        c = await timed(() => local.sample());
      }
      w.push(a);
      l.push(c);
      r.push(a / c);
    }
    blocks.push({ w: median(w), l: median(l), r: median(r) });
    console.log(`block ${b + 1}: watch ${median(w).toFixed(2)} ms, baseline ${median(l).toFixed(2)} ms, ratio ${median(r).toFixed(2)}`);
  }
  console.log(`spread of the block medians (sd of logs): watch ${logSpread(blocks.map((x) => x.w)).toFixed(3)}, baseline ${logSpread(blocks.map((x) => x.l)).toFixed(3)}, ratio ${logSpread(blocks.map((x) => x.r)).toFixed(3)}`);
  await local.close();
  await handle.stop();
  await sbx.kill();
} finally {
  await close();
  await base.close();
  rmSync(localDir, { recursive: true, force: true });
}
