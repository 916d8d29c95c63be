// The runtime: how fast a sandbox becomes ready, cold and from the warm pool,
// and what an idle sandbox costs, next to a bare `runc run true` on the same
// root filesystem measured in the same run.
import { RuncRuntime } from '@paddock/runtime';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBaselineProcess } from '../baseline-process.mjs';
import { removeUnmounted, undoOnInterrupt } from '../interrupt.mjs';
import { perCpuFreeBytes, row, settleDisk, summarize, timePair } from '../lib.mjs';

const MiB = 1024 * 1024;

/**
 * The host's available memory: MemAvailable, plus what the kernel holds in
 * its per-CPU free lists (perCpuFreeBytes), which it does not count. What
 * those lists held moved MemAvailable alone by up to 2 MiB a sandbox, at
 * either end of the memory suite (probes/idle-memory.mjs): 50 sandboxes
 * read as 12.6 or 13.8 MiB each, depending on whether the lists were full
 * before the creates, and 13.8 or 15.8 depending on whether they had
 * drained after.
 */
function hostAvailable() {
  const available = Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
  return available + perCpuFreeBytes();
}

/**
 * Reads `read()` once a second until `steady(last, before, beforeThat)` holds
 * for the last three readings and at least `minMs` have passed, or `maxMs`
 * have; gives the last reading and whether it settled.
 */
async function settled(read, steady, { minMs = 0, maxMs }) {
  const since = performance.now();
  const seen = [await read()];
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    seen.push(await read());
    const waited = performance.now() - since;
    const still = seen.length >= 3 && steady(seen.at(-1), seen.at(-2), seen.at(-3));
    if ((still && waited >= minMs) || waited >= maxMs) return { value: seen.at(-1), still, waited };
  }
}

/**
 * hostAvailable once it has held within 2 MiB over two seconds: it rose by
 * several MiB a second for a while after sandboxes were destroyed, and read
 * in that while it counted the rise against the 50 new sandboxes. Gives the
 * value, whether it settled, and how long that took.
 */
async function settledAvailable(maxMs) {
  return settled(hostAvailable, (a, _b, c) => Math.abs(a - c) < 2 * MiB, { maxMs });
}

/**
 * `runc run` of /bin/true in a bundle whose root is the same stack a sandbox
 * gets (base template layers over the host view), without envd or limits.
 * The layer paths are the runtime's on-disk layout. Each run is started
 * from `base`, the baseline process. Returns `run(i)`, to alternate with a
 * subject, and `close()`, which removes the bundle (also when the run is
 * interrupted, see interrupt.mjs).
 */
export function openBareRunc(base, dataDir) {
  const bundle = join(dataDir, 'bench-bundle');
  for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(bundle, d), { recursive: true, mode: 0o755 });
  // The base template's layers as its meta.json lists them, top-most first.
  const template = join(dataDir, 'templates/base');
  const layers = JSON.parse(readFileSync(join(template, 'meta.json'), 'utf8')).layers.map((l) => join(template, l));
  const lowers = [...layers, join(dataDir, 'hostview')].join(':');
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lowers},upperdir=${join(bundle, 'upper')},workdir=${join(bundle, 'work')}`, join(bundle, 'rootfs')]);
  const state = join(dataDir, 'bench-runc');
  const close = undoOnInterrupt(() => {
    execFileSync('umount', [join(bundle, 'rootfs')]);
    rmSync(bundle, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });
  try {
    execFileSync('runc', ['spec', '--bundle', bundle]);
    const config = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8'));
    config.process.terminal = false;
    config.process.args = ['/bin/true'];
    config.process.rlimits = [];
    config.root.readonly = false;
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  } catch (err) {
    void close().catch((e) => process.stderr.write(`[bench] ${e.message}\n`));
    throw err;
  }
  let runs = 0;
  return {
    run: () => base.spawn('runc', ['--root', state, 'run', '--bundle', bundle, `bench-${runs++}-${process.pid}`]),
    close,
  };
}

/**
 * The note under a row of concurrent creates: how long each batch took until
 * all its sandboxes were ready. A batch is a single measurement that moves
 * with the machine's moment (by 10 to 30% between consecutive runs here), so
 * a row of one batch has no interval, and a row of several reports their
 * median.
 */
export function batchesNote(count, seconds) {
  const each = seconds.map((s) => s.toFixed(2)).join(', ');
  return seconds.length === 1 ? `one batch, not a median: all ${count} were ready in ${each} s` : `the median of ${seconds.length} batches, in each of which all ${count} were ready (in ${each} s)`;
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
 * median has held within 1% over two seconds (30 s at most).
 * Single sandboxes keep moving by a quarter MiB now and then, so the
 * median is what has to hold still.
 */
async function settledMemory(runtime, ids, minIdleMs, log) {
  const read = () => Promise.all(ids.map(async (id) => (await runtime.stats(id)).memUsed));
  const within = (x, y) => Math.abs(summarize(x).p50 - summarize(y).p50) <= summarize(y).p50 * 0.01;
  const r = await settled(read, (a, b, c) => within(b, a) && within(c, a), { minMs: minIdleMs, maxMs: 30_000 });
  log(`memory: idle memory read ${(r.waited / 1000).toFixed(0)} s after the last create${r.still ? '' : ', not yet settled'}`);
  return r.value;
}

/**
 * A RuncRuntime of its own, in a data directory of its own, for `fn`; removed
 * with everything in it afterwards.
 */
export async function withRuntime(warmPoolSize, log, fn) {
  const dataDir = mkdtempSync(join(tmpdir(), 'paddock-bench-rt-'));
  const runtime = new RuncRuntime({ dataDir, warmPoolSize });
  // Only an empty, unmounted data directory may be deleted.
  const remove = undoOnInterrupt(async () => {
    await runtime.removeEverything();
    await removeUnmounted(dataDir);
  });
  try {
    await runtime.prepare();
    return await fn(runtime, dataDir);
  } finally {
    await remove().catch((err) => log(`left ${dataDir} behind: ${err.message}`));
  }
}

/** A layer below the server (`--layers`): the runtime's own create, cold and from its warm pool. */
export async function runtimeSuite({ quick, log }) {
  const rows = [];
  const iterations = quick ? 5 : 30;
  await withRuntime(2, log, async (runtime, dataDir) => {
    await runtime.poolReady();
    const base = await startBaselineProcess();
    const bare = openBareRunc(base, dataDir);
    try {
      log('runtime: cold create to envd ready');
      const [cold, bareCold] = await timePair(
        async () => {
          const t = performance.now();
          const s = await runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'bench' } });
          const elapsedMs = performance.now() - t;
          await runtime.destroy(s.id);
          return { elapsedMs };
        },
        bare.run,
        { warmup: 2, iterations },
      );
      rows.push(row({ suite: 'runtime', name: 'create to envd ready, cold', unit: 'ms', value: cold, baseline: bareCold, baselineName: 'bare `runc run true`, same rootfs' }));

      log('runtime: warm pool create to envd ready');
      // The refill is awaited at the end of each sample, so that it does not
      // run during the bare `runc run` that follows (as in the sdk suite).
      await runtime.poolReady();
      const [warm, bareWarm] = await timePair(
        async () => {
          const t = performance.now();
          const s = await runtime.create({ templateId: 'base', init: { accessToken: 'bench' } });
          const elapsedMs = performance.now() - t;
          if (!s.fromPool) throw new Error('expected a pooled sandbox');
          await runtime.destroy(s.id);
          await runtime.poolReady();
          return { elapsedMs };
        },
        bare.run,
        { warmup: 2, iterations },
      );
      rows.push(row({ suite: 'runtime', name: 'create to envd ready, warm pool', unit: 'ms', value: warm, baseline: bareWarm, baselineName: 'bare `runc run true`, same rootfs' }));
    } finally {
      await bare.close();
      await base.close();
    }
  });
  return rows;
}

/**
 * Idle sandboxes: the host memory each takes, and 50
 * alive at once. Created straight through the runtime, as the server would,
 * so that the control plane's own memory is not counted against them.
 */
export async function memorySuite({ quick, log }) {
  const rows = [];
  await withRuntime(0, log, async (runtime) => {
    const count = quick ? 5 : 50;
    log(`memory: ${count} idle sandboxes`);
    settleDisk();
    const { value: before } = await settledAvailable(quick ? 3000 : 15_000);
    const started = performance.now();
    const ids = [];
    for (let i = 0; i < count; i++) ids.push((await runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'bench' } })).id);
    const elapsed = (performance.now() - started) / 1000;
    const cgroupPer = (await settledMemory(runtime, ids, quick ? 3000 : 10_000, log)).map((bytes) => bytes / MiB);
    const after = await settledAvailable(quick ? 3000 : 30_000);
    log(`memory: host memory read ${(after.waited / 1000).toFixed(0)} s after the sandboxes settled${after.still ? '' : ', not yet settled'}`);
    const hostPer = (before - after.value) / count / MiB;
    const alive = (await runtime.list()).filter((s) => s.status === 'running').length;
    rows.push(row({ suite: 'memory', name: `idle sandbox memory, host available memory drop / ${count}`, unit: 'MiB', value: { p50: hostPer, p95: hostPer }, target: { on: 'value', op: '<=', value: 50 }, note: `MemAvailable plus the kernel's per-CPU free lists, before the creates and once the ${count} were idle` }));
    rows.push(row({ suite: 'memory', name: 'idle sandbox memory, its cgroup (envd + container)', unit: 'MiB', value: summarize(cgroupPer), target: { on: 'value', op: '<=', value: 50 } }));
    rows.push(row({ suite: 'memory', name: `sandboxes alive at once (of ${count} created)`, unit: 'sandboxes', value: { p50: alive, p95: alive }, lowerIsBetter: false, target: { on: 'value', op: '>=', value: count }, note: `the ${count} were created one after another in ${elapsed.toFixed(1)} s` }));
  });
  return rows;
}
