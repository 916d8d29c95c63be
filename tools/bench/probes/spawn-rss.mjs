// Probe, not part of `npm run bench`: what a spawn costs against how much
// memory the spawning process has mapped. Node starts children by forking,
// and the fork copies the parent's page tables, so a baseline spawned from a
// process that has grown (by moving data, say) is slower than one spawned from
// a fresh process. This process spawns `true` 40 times fresh, then again after
// touching 256 MiB, 512 MiB and 1 GiB of buffers, and once more after dropping
// them; for each it prints its RSS and the median spawn. It is why the bench
// spawns its baselines from a process that does nothing else
// (baseline-process.mjs).
//
//   node --expose-gc tools/bench/probes/spawn-rss.mjs
import { spawn } from 'node:child_process';

const MiB = 1 << 20;

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

function spawnTrue() {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn('/bin/true', [], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve(performance.now() - t));
  });
}

async function report(label) {
  const ms = [];
  for (let i = 0; i < 40; i++) ms.push(await spawnTrue());
  const rss = process.memoryUsage().rss / MiB;
  console.log(`${label.padEnd(16)} RSS ${rss.toFixed(0).padStart(5)} MiB   spawn of true, p50 ${median(ms).toFixed(2)} ms`);
}

await report('fresh');
const held = [];
for (const size of [256, 512, 1024]) {
  // Filled, so that every page is mapped (Buffer.alloc of zeros may not touch them).
  while (held.length * 64 < size) held.push(Buffer.alloc(64 * MiB, 1));
  await report(`+${size} MiB held`);
}
held.length = 0;
if (globalThis.gc) globalThis.gc();
await new Promise((r) => setTimeout(r, 500));
await report('dropped');
