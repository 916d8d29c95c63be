// temp probe: 20 concurrent creates vs 20 concurrent bare runc, alternating
import { Sandbox } from '@paddock/sdk';
import { startBaselineProcess } from '../baseline-process.mjs';
import { serverInHome } from '../server-process.mjs';
import { openBareRunc } from '../suites/runtime.mjs';
import { join } from 'node:path';
const KEY = 'e2b_' + 'd'.repeat(40);
const base = await startBaselineProcess();
const pool = Number(process.argv[2] ?? 0);
const rounds = Number(process.argv[3] ?? 8);
const { server, home, close } = await serverInHome('paddock-bench-probe-', { warmPoolSize: pool, initialApiKey: KEY, metricsIntervalMs: 60_000 });
const opts = { apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl };
const bare = openBareRunc(base, join(home, 'runtime'));
const out = [];
try {
  for (let i = 0; i < rounds + 1; i++) {
    if (pool) await server.poolReady();
    let t = performance.now();
    const made = await Promise.all(Array.from({ length: 20 }, async () => { const s = await Sandbox.create(opts); await s.commands.run('true'); return s; }));
    const p = performance.now() - t;
    await Promise.all(made.map((s) => s.kill()));
    if (pool) await server.poolReady();
    t = performance.now();
    await Promise.all(Array.from({ length: 20 }, () => bare.run()));
    const b = performance.now() - t;
    t = performance.now();
    const seq = []; for (let k = 0; k < 5; k++) seq.push(await bare.run());
    const s5 = (performance.now() - t) / 5;
    if (i) out.push({ p, b, s5 });
    console.log(`batch ${(p / 1000).toFixed(2)} s  bare20 ${(b / 1000).toFixed(2)} s  seq ${s5.toFixed(1)} ms  ratio-conc ${(b / p).toFixed(3)}  ratio-seq ${(1000 * 20 / p / (1000 / s5)).toFixed(3)}`);
  }
} finally { await bare.close(); await close(); await base.close(); }
const sd = (a) => { const l = a.map(Math.log); const m = l.reduce((x, y) => x + y) / l.length; return Math.sqrt(l.reduce((x, y) => x + (y - m) ** 2, 0) / (l.length - 1)); };
console.log('sd log: batch', sd(out.map((o) => o.p)).toFixed(3), 'ratio-conc', sd(out.map((o) => o.b / o.p)).toFixed(3), 'ratio-seq', sd(out.map((o) => o.s5 / o.p)).toFixed(3));
