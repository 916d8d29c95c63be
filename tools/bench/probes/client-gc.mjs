// Probe, not part of `npm run bench`: how many full GCs a client process runs
// while it reads 1 MiB files through @paddock/sdk one after another, and the
// CPU per read, in this process (the server runs in its own). On a heap as
// small as a client's, V8 counts the fresh buffers each read brings against
// its limit for a full collection, and a run either falls into a full mark
// every 10 to 20 MiB or does not; run it a few times, and again with the
// option the sdk README names, to see both.
//
//   N=1000 node tools/bench/probes/client-gc.mjs
//   N=1000 node --initial-old-space-size=64 tools/bench/probes/client-gc.mjs
import { Sandbox } from '@paddock/sdk';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fullGcs } from '../lib.mjs';
import { startServerProcess } from '../server-process.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const MiB = 1 << 20;
const N = +(process.env.N ?? 1000);

const home = mkdtempSync(join(tmpdir(), 'client-gc-'));
const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
try {
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false });
  await sbx.files.write('probe.bin', randomBytes(MiB));
  const read = async () => {
    let bytes = 0;
    for await (const c of await sbx.files.read('probe.bin', { format: 'stream' })) bytes += c.length;
    if (bytes !== MiB) throw new Error(`read ${bytes} bytes`);
  };
  for (let i = 0; i < 50; i++) await read();
  const gcs = fullGcs();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await read();
  const wall = (performance.now() - t0) / N;
  const cpu = process.cpuUsage(cpu0);
  const { count, ms } = gcs.stop();
  console.log(
    `${N} reads of 1 MiB: ${count} full GCs (${ms.toFixed(0)} ms of pauses); per read ${wall.toFixed(3)} ms wall, ` +
      `${((cpu.user + cpu.system) / 1000 / N).toFixed(3)} ms of this process's CPU (all its threads)`,
  );
  await sbx.kill();
} finally {
  await server.close();
  rmSync(home, { recursive: true, force: true });
}
