// The control plane: `POST /v2/sandboxes` until envd answers through the
// proxy, one at a time and 20 at once (10 with --quick), with and without the warm pool,
// next to a bare `runc run true` on the same root filesystem.
import { join } from 'node:path';
import { startBaselineProcess } from '../baseline-process.mjs';
import { row, timePair } from '../lib.mjs';
import { serverInHome } from '../server-process.mjs';
import { batchesNote, openBareRunc } from './runtime.mjs';

const KEY = 'e2b_' + 'b'.repeat(40);

async function withServer(poolSize, fn) {
  const { server, home, close } = await serverInHome('paddock-bench-srv-', { warmPoolSize: poolSize, initialApiKey: KEY, metricsIntervalMs: 60_000 });
  try {
    return await fn(server, home);
  } finally {
    await close();
  }
}

/** Creates a sandbox and waits until its envd answers /health through the proxy; ms. */
async function createReady(server) {
  const t = performance.now();
  const res = await fetch(`${server.apiUrl}/v2/sandboxes`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ templateID: 'base' }),
  });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
  const s = await res.json();
  const health = await fetch(`${server.proxyUrl}/health`, { headers: { 'E2b-Sandbox-Id': s.sandboxID, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': s.envdAccessToken } });
  if (health.status !== 204) throw new Error(`envd not ready: ${health.status}`);
  return { ms: performance.now() - t, id: s.sandboxID };
}

async function kill(server, id) {
  await fetch(`${server.apiUrl}/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': KEY } });
}

export async function serverSuite({ quick, log }) {
  const rows = [];
  const iterations = quick ? 5 : 25;
  const concurrent = quick ? 10 : 20; // as in the sdk suite
  for (const pool of [0, 4]) {
    await withServer(pool, async (server, home) => {
      const label = pool ? `warm pool of ${pool}` : 'no warm pool';
      log(`server: create to ready, ${label}`);
      // In alternation with bare `runc run`, as in the sdk suite: both move
      // with the machine's speed, which drifts within a run.
      const base = await startBaselineProcess();
      // The refill is awaited at the end of each sample, so that it does not
      // run during the bare `runc run` that follows (as in the sdk suite).
      const bare = openBareRunc(base, join(home, 'runtime'));
      if (pool) await server.poolReady();
      const [value, bareRuns] = await timePair(
        async () => {
          const { ms, id } = await createReady(server);
          await kill(server, id);
          if (pool) await server.poolReady();
          return { elapsedMs: ms };
        },
        bare.run,
        { warmup: 2, iterations },
      ).finally(async () => {
        await bare.close();
        await base.close();
      });
      rows.push(row({ suite: 'server', name: `POST /v2/sandboxes to envd ready, ${label}`, unit: 'ms', value, baseline: bareRuns, baselineName: 'bare `runc run true`, same rootfs' }));
      log(`server: ${concurrent} concurrent creates, ${label}`);
      if (pool) await server.poolReady();
      const t = performance.now();
      const made = await Promise.all(Array.from({ length: concurrent }, () => createReady(server)));
      const seconds = (performance.now() - t) / 1000;
      const rate = concurrent / seconds;
      const perBare = 1000 / bareRuns.p50;
      rows.push(
        row({
          suite: 'server',
          name: `${concurrent} concurrent creates, ${label}`,
          unit: 'sandboxes/s',
          value: { p50: rate, p95: rate },
          baseline: { p50: perBare, p95: perBare },
          baselineName: 'bare `runc run true` one after another',
          lowerIsBetter: false,
          note: batchesNote(concurrent, [seconds]),
        }),
      );
      for (const m of made) await kill(server, m.id);
    });
  }
  return rows;
}
