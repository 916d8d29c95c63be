// Probe, not part of `npm run bench`: how the host's memory moves after N
// idle sandboxes are created, as the memory suite creates them (cold, one
// after another, straight through the runtime). Every two seconds for 40 s
// it prints, per sandbox, how far MemAvailable, MemFree and AnonPages have
// moved from before the creates, and how many MiB the kernel holds in its
// per-CPU free lists (the `count:` lines of /proc/zoneinfo), which do not
// count as free.
//
//   N=50 node tools/bench/probes/idle-memory.mjs
import { readFileSync } from 'node:fs';
import { undoAllOnSignals } from '../interrupt.mjs';
import { perCpuFreeBytes, settleDisk } from '../lib.mjs';
import { withRuntime } from '../suites/runtime.mjs';

const MiB = 1024 * 1024;
const N = +(process.env.N ?? 50);

/** The fields of /proc/meminfo, in bytes. */
function meminfo() {
  const fields = {};
  for (const line of readFileSync('/proc/meminfo', 'utf8').trim().split('\n')) {
    const m = /^(\S+):\s+(\d+)/.exec(line);
    if (m) fields[m[1]] = Number(m[2]) * 1024;
  }
  return fields;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// The 50 sandboxes go whatever ends the probe: Ctrl-C, or a reader that
// stops reading (`| head`), whose EPIPE would otherwise end it at once.
undoAllOnSignals();
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
});
await withRuntime(0, (line) => console.error(line), async (runtime) => {
  settleDisk();
  await sleep(5000);
  const before = meminfo();
  console.log(`before: per-CPU free lists ${(perCpuFreeBytes() / MiB).toFixed(0)} MiB`);
  for (let i = 0; i < N; i++) await runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'probe' } });
  const per = (now, field) => ((before[field] - now[field]) / N / MiB).toFixed(2).padStart(6);
  for (let s = 2; s <= 40; s += 2) {
    await sleep(2000);
    const now = meminfo();
    console.log(
      `${String(s).padStart(3)} s after the last create, per sandbox: MemAvailable -${per(now, 'MemAvailable')} MiB, MemFree -${per(now, 'MemFree')}, AnonPages +${((now.AnonPages - before.AnonPages) / N / MiB).toFixed(2)}; per-CPU free lists ${(perCpuFreeBytes() / MiB).toFixed(0)} MiB`,
    );
  }
});
