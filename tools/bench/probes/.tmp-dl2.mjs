import { EnvdClient } from '@paddock/envd-client';
import { randomBytes } from 'node:crypto';
import { startLocalEnvd } from '../../testing/local-envd.mjs';
import { startBaselineProcess } from '../baseline-process.mjs';
import { throughputPair, settleDisk, fullGcs } from '../lib.mjs';
const MiB = 1 << 20, SIZE = 256 * MiB, N = +(process.env.N ?? 21);
const envd = await startLocalEnvd({ prefix: 'dl-' });
const base = await startBaselineProcess();
const files = new EnvdClient({ envdUrl: envd.url });
const payload = randomBytes(SIZE);
const tcp = () => base.loopbackTcp(SIZE);
const up = async () => { await files.upload('upload.bin', payload, { encoding: 'octet-stream' }); return SIZE; };
const down = async () => { let b = 0; for await (const c of await files.download('upload.bin', { format: 'node-stream' })) b += c.length; return b; };
for (let round = 0; round < (+process.env.ROUNDS || 2); round++) {
  for (const [name, fn] of [['up', up], ['down', down]]) {
    settleDisk();
    const gc = fullGcs();
    const [p, b] = await throughputPair(fn, tcp, { warmup: 1, iterations: N });
    const g = gc.stop();
    console.log(round, name, 'gc', g.count, 'P', p.samples.map((x) => Math.round(x)).join(' '));
    console.log(round, name, '   B', b.samples.map((x) => Math.round(x)).join(' '));
  }
}
await base.close(); await envd.stop();
