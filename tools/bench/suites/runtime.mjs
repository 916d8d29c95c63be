// The runtime: how fast a sandbox becomes ready, cold and from the warm pool,
// and what an idle sandbox costs, next to a bare `runc run true` on the same
// root filesystem measured in the same run.
import { RuncRuntime } from '@paddock/runtime';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBaselineProcess } from '../baseline-process.mjs';
import { row, summarize, timeit } from '../lib.mjs';

const MiB = 1024 * 1024;

function memAvailable() {
  return Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
}

/**
 * MemAvailable once the host has stopped giving back what the phases before
 * freed: it rose by several MiB a second for a while after sandboxes were
 * destroyed, and read in that while it counted the rise against the 50 new
 * sandboxes. Waits until it moved by less than 2 MiB over the last two
 * seconds, `maxSeconds` at most.
 */
async function settledMemAvailable(maxSeconds) {
  const seen = [memAvailable()];
  for (let i = 0; i < maxSeconds; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    seen.push(memAvailable());
    if (seen.length >= 3 && Math.abs(seen.at(-1) - seen.at(-3)) < 2 * MiB) break;
  }
  return seen.at(-1);
}

/**
 * `runc run` of /bin/true in a bundle whose root is the same stack a sandbox
 * gets (base template layers over the host view), without envd or limits.
 * The layer paths are the runtime's on-disk layout. Each run is started
 * from `base`, the baseline process. Returns `run(i)`, for timeit or to
 * alternate with a subject, and `close()`, which removes the bundle.
 */
export function openBareRunc(base, dataDir) {
  const bundle = join(dataDir, 'bench-bundle');
  for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(bundle, d), { recursive: true, mode: 0o755 });
  const template = join(dataDir, 'templates/base/base-v1');
  const lowers = [join(template, 'layer'), join(template, 'mask'), join(dataDir, 'hostview')].join(':');
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lowers},upperdir=${join(bundle, 'upper')},workdir=${join(bundle, 'work')}`, join(bundle, 'rootfs')]);
  const state = join(dataDir, 'bench-runc');
  const close = () => {
    execFileSync('umount', [join(bundle, 'rootfs')]);
    rmSync(bundle, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  };
  try {
    execFileSync('runc', ['spec', '--bundle', bundle]);
    const config = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8'));
    config.process.terminal = false;
    config.process.args = ['/bin/true'];
    config.process.rlimits = [];
    config.root.readonly = false;
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  } catch (err) {
    close();
    throw err;
  }
  let runs = 0;
  return {
    run: () => base.spawn('runc', ['--root', state, 'run', '--bundle', bundle, `bench-${runs++}-${process.pid}`]),
    close,
  };
}

/** timeit of openBareRunc's runs, on their own. */
export async function bareRunc(base, dataDir, iterations) {
  const bare = openBareRunc(base, dataDir);
  try {
    return await timeit(bare.run, { warmup: 3, iterations });
  } finally {
    bare.close();
  }
}

/**
 * Each sandbox's memory once it is idle. A new envd holds more than it will
 * idle at: its V8 heap grows while it starts, and V8 gives the growth back
 * once the process has been quiet for some seconds. One sandbox here went
 * 15.4 MiB at start, 17.5 from 3 s to 8 s, then 13.7 and stayed there. Read
 * 3 s after the last of 50 creates, the older ones had shrunk and the newer
 * had not, and the median fell on 13.9, 15.5 or 17.2 MiB from one run to
 * the next. So this reads once the youngest sandbox has been up
 * `minIdleMs` (10 s; `--quick` takes 3 s and the rough figure) and the
 * median has held within 1% over the last two seconds (30 s at most).
 * Single sandboxes keep moving by a quarter MiB now and then, so the
 * median is what has to hold still.
 */
async function settledMemory(runtime, ids, minIdleMs, log) {
  const MAX_WAIT_MS = 30_000;
  const read = () => Promise.all(ids.map(async (id) => (await runtime.stats(id)).memUsed));
  const since = performance.now();
  const samples = [await read()];
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    samples.push(await read());
    const waited = performance.now() - since;
    const medians = samples.slice(-3).map((s) => summarize(s).p50);
    const still = medians.length === 3 && medians.every((m) => Math.abs(m - medians[2]) <= medians[2] * 0.01);
    if ((still && waited >= minIdleMs) || waited >= MAX_WAIT_MS) {
      log(`runtime: idle memory read ${(waited / 1000).toFixed(0)} s after the last create${still ? '' : ', not yet settled'}`);
      return samples.at(-1);
    }
  }
}

export async function runtimeSuite({ quick, log }) {
  const rows = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'paddock-bench-rt-'));
  const iterations = quick ? 5 : 30;
  const runtime = new RuncRuntime({ dataDir, warmPoolSize: 2 });
  try {
    await runtime.prepare();
    await runtime.poolReady();
    log('runtime: bare runc run true');
    const base = await startBaselineProcess();
    const bare = await bareRunc(base, dataDir, iterations).finally(() => base.close());

    log('runtime: cold create to envd ready');
    const cold = await timeit(
      async () => {
        const s = await runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'bench' } });
        // Destroyed while the next one is created, as under real load.
        setImmediate(() => runtime.destroy(s.id).catch((err) => log(`destroy failed: ${err.message}`)));
      },
      { warmup: 2, iterations },
    );
    rows.push(row({ suite: 'runtime', name: 'create to envd ready, cold', unit: 'ms', value: cold, baseline: bare, baselineName: 'bare `runc run true`, same rootfs' }));

    log('runtime: warm pool create to envd ready');
    const samples = [];
    for (let i = 0; i < iterations + 2; i++) {
      await runtime.poolReady();
      const t = performance.now();
      const s = await runtime.create({ templateId: 'base', init: { accessToken: 'bench' } });
      if (i >= 2) samples.push(performance.now() - t);
      if (!s.fromPool) throw new Error('expected a pooled sandbox');
      await runtime.destroy(s.id);
    }
    rows.push(row({ suite: 'runtime', name: 'create to envd ready, warm pool', unit: 'ms', value: summarize(samples), baseline: bare, baselineName: 'bare `runc run true`, same rootfs' }));

    const count = quick ? 5 : 50;
    log(`runtime: ${count} idle sandboxes`);
    await runtime.close();
    execFileSync('sync');
    const before = await settledMemAvailable(quick ? 3 : 15);
    const started = performance.now();
    const ids = [];
    for (let i = 0; i < count; i++) ids.push((await runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'bench' } })).id);
    const elapsed = (performance.now() - started) / 1000;
    const cgroupPer = (await settledMemory(runtime, ids, quick ? 3000 : 10_000, log)).map((bytes) => bytes / MiB);
    const hostPer = (before - memAvailable()) / count / MiB;
    const alive = (await runtime.list()).filter((s) => s.status === 'running').length;
    rows.push(row({ suite: 'runtime', name: `idle sandbox memory, host MemAvailable drop / ${count}`, unit: 'MiB', value: { p50: hostPer, p95: hostPer }, target: { on: 'value', op: '<=', value: 50 } }));
    rows.push(row({ suite: 'runtime', name: 'idle sandbox memory, its cgroup (envd + container)', unit: 'MiB', value: summarize(cgroupPer), target: { on: 'value', op: '<=', value: 50 } }));
    rows.push(row({ suite: 'runtime', name: `sandboxes alive at once (of ${count} created in ${elapsed.toFixed(1)} s)`, unit: 'sandboxes', value: { p50: alive, p95: alive }, lowerIsBetter: false, target: { on: 'value', op: '>=', value: count } }));
  } finally {
    // Only an empty, unmounted data directory may be deleted.
    await runtime
      .removeEverything()
      .then(() => rmSync(dataDir, { recursive: true, force: true }))
      .catch((err) => log(`left ${dataDir} behind: ${err.message}`));
  }
  return rows;
}
