// The runtime's own create, cold and from its warm pool, on its default OCI
// runtime (crun where installed) and cold on the other, next to a bare
// `runc run true` on the same root filesystem (`--layers`); and what an idle
// sandbox costs the host (`memory`, run by default).
import { defaultOciRuntime, RuncRuntime } from '@paddock/runtime';
import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeUnmounted, undoOnInterrupt } from '../interrupt.mjs';
import { closings, MiB, pair, row, settleDisk, summarize } from '../lib.mjs';
import { startBaselines } from '../processes.mjs';

/** The image store every bench runtime shares, as the tests do (tools/jest/run.mjs). */
export const sharedImages = {
  layersDir: process.env.PADDOCK_IMAGES_DIR ?? join(process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache', 'layers'),
  cacheDir: process.env.PADDOCK_CACHE_DIR ?? process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache',
};

/**
 * A bundle whose root is the stack a sandbox gets (the base template's image
 * layers from the image store), without envd, limits or a user namespace. `run()` runs /bin/true in it from the spawner; `close()`
 * removes it (also on interruption).
 */
export function openBareRunc(base, dataDir) {
  const bundle = join(dataDir, 'bench-bundle');
  const state = join(dataDir, 'bench-runc');
  for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(bundle, d), { recursive: true, mode: 0o755 });
  const { image } = JSON.parse(readFileSync(join(dataDir, 'templates/base/meta.json'), 'utf8'));
  const lowers = image.diffIds
    .map((d) => join(sharedImages.layersDir, 'sha256', d.slice('sha256:'.length), 'fs'))
    .reverse()
    .join(':');
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lowers},upperdir=${bundle}/upper,workdir=${bundle}/work`, `${bundle}/rootfs`]);
  const close = undoOnInterrupt(() => {
    execFileSync('umount', [`${bundle}/rootfs`]);
    rmSync(bundle, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });
  try {
    execFileSync('runc', ['spec', '--bundle', bundle]);
    const config = JSON.parse(readFileSync(`${bundle}/config.json`, 'utf8'));
    Object.assign(config.process, { terminal: false, args: ['/bin/true'], rlimits: [] });
    config.root.readonly = false;
    writeFileSync(`${bundle}/config.json`, JSON.stringify(config));
  } catch (err) {
    void close().catch((e) => process.stderr.write(`[bench] ${e.message}\n`));
    throw err;
  }
  let runs = 0;
  return { run: () => base.spawn('runc', ['--root', state, 'run', '--bundle', bundle, `bench-${runs++}-${process.pid}`]), close };
}

/** A RuncRuntime in a data directory of its own for `fn`; removed with everything in it afterwards. */
async function withRuntime(warmPoolSize, fn, options = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'paddock-bench-rt-'));
  const runtime = new RuncRuntime({ dataDir, warmPoolSize, ...sharedImages, ...options });
  const remove = undoOnInterrupt(async () => {
    await runtime.removeEverything();
    await removeUnmounted(dataDir);
  });
  try {
    await runtime.prepare();
    return await fn(runtime, dataDir);
  } finally {
    await remove();
  }
}

const create = (runtime, opts) => runtime.create({ templateId: 'base', init: { accessToken: 'bench' }, ...opts });

export async function runtimeSuite({ quick, log }) {
  const rows = [];
  await withRuntime(2, async (runtime, dataDir) => {
    const closing = closings();
    try {
      const base = await startBaselines();
      closing.add(base.close);
      const bare = openBareRunc(base, dataDir);
      closing.add(bare.close);
      for (const cold of [true, false]) {
        const label = cold ? 'cold' : 'warm pool';
        log(`runtime: create to envd ready, ${label}`);
        await runtime.poolReady();
        const createOnce = async () => {
          const t = performance.now();
          const s = await create(runtime, { cold });
          const ms = performance.now() - t;
          if (!cold && !s.fromPool) throw new Error('expected a pooled sandbox');
          await runtime.destroy(s.id);
          // The refills run here, not during the bare run that follows.
          await runtime.poolReady();
          await runtime.spareDisksReady();
          return { ms };
        };
        const [value, baseline] = await pair([createOnce, bare.run], { warmup: 2, iterations: quick ? 5 : 30 });
        rows.push(row({ suite: 'runtime', name: `create to envd ready, ${label}`, unit: 'ms', value, baseline, baselineName: 'bare `runc run true`, same rootfs' }));
      }
    } finally {
      await closing.run();
    }
  });
  // The same cold create with the other OCI runtime running the containers
  // (the runtime's ociRuntime option), where it is installed.
  const other = defaultOciRuntime() === 'crun' ? 'runc' : 'crun';
  if (onPath(other)) {
    await withRuntime(
      0,
      async (runtime, dataDir) => {
        const closing = closings();
        try {
          const base = await startBaselines();
          closing.add(base.close);
          const bare = openBareRunc(base, dataDir);
          closing.add(bare.close);
          log(`runtime: create to envd ready, cold, on ${other}`);
          const createOnce = async () => {
            const t = performance.now();
            const s = await create(runtime, { cold: true });
            const ms = performance.now() - t;
            await runtime.destroy(s.id);
            await runtime.spareDisksReady();
            return { ms };
          };
          const [value, baseline] = await pair([createOnce, bare.run], { warmup: 2, iterations: quick ? 5 : 30 });
          rows.push(row({ suite: 'runtime', name: `create to envd ready, cold, on ${other}`, unit: 'ms', value, baseline, baselineName: 'bare `runc run true`, same rootfs' }));
        } finally {
          await closing.run();
        }
      },
      { ociRuntime: other },
    );
  }
  return rows;
}

/** Whether `name` is an executable on PATH. */
function onPath(name) {
  return (process.env.PATH ?? '/usr/bin:/bin').split(':').some((d) => {
    try {
      accessSync(join(d, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Reads `read()` once a second until `steady(newest, oldest)` holds over three readings and `minMs` have passed, or `maxMs` have. */
async function settled(read, steady, { minMs = 0, maxMs }) {
  const since = performance.now();
  const seen = [await read()];
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    seen.push(await read());
    const waited = performance.now() - since;
    if ((seen.length >= 3 && steady(seen.at(-1), seen.at(-3)) && waited >= minMs) || waited >= maxMs) return seen.at(-1);
  }
}

/**
 * The host's available memory: MemAvailable plus the pages in the kernel's
 * per-CPU free lists, which it does not count and which fill and drain when
 * much memory is freed at once.
 */
function hostAvailable() {
  const available = Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
  const perCpuPages = [...readFileSync('/proc/zoneinfo', 'utf8').matchAll(/^\s+count:\s+(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  return available + perCpuPages * Number(execFileSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }));
}

const steadyWithin = (bytes) => (a, b) => Math.abs(a - b) < bytes;

/**
 * Idle sandboxes, created straight through the runtime so that the control
 * plane's memory is not counted against them. A new envd's heap grows while
 * it starts and shrinks once it has been quiet a while, so each sandbox's
 * memory is read once the youngest has idled and their median holds still.
 */
export async function memorySuite({ quick, log }) {
  const count = quick ? 5 : 50;
  return withRuntime(0, async (runtime) => {
    log(`memory: ${count} idle sandboxes`);
    settleDisk();
    const before = await settled(hostAvailable, steadyWithin(2 * MiB), { maxMs: quick ? 3000 : 15_000 });
    const started = performance.now();
    const ids = [];
    for (let i = 0; i < count; i++) ids.push((await create(runtime, { cold: true })).id);
    const seconds = (performance.now() - started) / 1000;
    const readCgroups = async () => summarize(await Promise.all(ids.map(async (id) => (await runtime.stats(id)).memUsed / MiB)));
    const cgroups = await settled(readCgroups, (a, b) => Math.abs(a.p50 - b.p50) <= a.p50 * 0.01, { minMs: quick ? 3000 : 10_000, maxMs: 30_000 });
    const after = await settled(hostAvailable, steadyWithin(2 * MiB), { maxMs: quick ? 3000 : 30_000 });
    const hostPer = (before - after) / count / MiB;
    const alive = (await runtime.list()).filter((s) => s.status === 'running').length;
    log(`memory: ${count} created one after another in ${seconds.toFixed(1)} s`);
    const target = (op, value) => ({ on: 'value', op, value });
    return [
      row({ suite: 'memory', name: `idle sandbox memory, host available memory drop / ${count}`, unit: 'MiB', value: { n: 1, p50: hostPer, p90: hostPer }, target: target('<=', 50) }),
      row({ suite: 'memory', name: 'idle sandbox memory, its cgroup (envd + container)', unit: 'MiB', value: cgroups, target: target('<=', 50) }),
      row({ suite: 'memory', name: `sandboxes alive at once (of ${count} created)`, unit: 'sandboxes', value: { n: 1, p50: alive, p90: alive }, target: target('>=', count) }),
    ];
  });
}
