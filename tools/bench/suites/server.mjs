// The control plane (`--layers`): `POST /v2/sandboxes` until envd answers
// through the proxy, one at a time and many at once, with and without a warm
// pool, next to a bare `runc run true` on the same root filesystem.
import { join } from 'node:path';
import { allAtOnce, closings, failures, pair, row, summarize } from '../lib.mjs';
import { serverInHome, startBaselines } from '../processes.mjs';
import { openBareRunc } from './runtime.mjs';

const KEY = 'e2b_' + 'b'.repeat(40);

/** Creates a sandbox and waits until its envd answers /health through the proxy. */
async function createReady(server) {
  const t = performance.now();
  const res = await fetch(`${server.apiUrl}/v2/sandboxes`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body: '{"templateID":"base"}' });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
  const s = await res.json();
  const health = await fetch(`${server.proxyUrl}/health`, { headers: { 'E2b-Sandbox-Id': s.sandboxID, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': s.envdAccessToken } });
  if (health.status !== 204) throw new Error(`envd not ready: ${health.status}`);
  return { ms: performance.now() - t, id: s.sandboxID };
}

const kill = (server, id) => fetch(`${server.apiUrl}/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': KEY } });

export async function serverSuite({ quick, log }) {
  const rows = [];
  const concurrent = quick ? 10 : 20;
  for (const pool of [0, 4]) {
    const label = pool ? `warm pool of ${pool}` : 'no warm pool';
    const closing = closings();
    try {
      const server = await serverInHome('paddock-bench-srv-', { warmPoolSize: pool, initialApiKey: KEY, metricsIntervalMs: 60_000 });
      closing.add(server.close);
      const base = await startBaselines();
      closing.add(base.close);
      const bare = openBareRunc(base, join(server.home, 'runtime'));
      closing.add(bare.close);
      log(`server: create to ready, ${label}`);
      await server.poolReady();
      const createOnce = async () => {
        const { ms, id } = await createReady(server);
        await kill(server, id);
        // The refill runs here, not during the bare run that follows.
        await server.poolReady();
        return { ms };
      };
      const [value, bareRuns] = await pair([createOnce, bare.run], { warmup: 2, iterations: quick ? 5 : 25 });
      rows.push(row({ suite: 'server', name: `POST /v2/sandboxes to envd ready, ${label}`, unit: 'ms', value, baseline: bareRuns, baselineName: 'bare `runc run true`, same rootfs' }));

      log(`server: ${concurrent} concurrent creates, ${label}`);
      await server.poolReady();
      const t = performance.now();
      const { made, failed } = await allAtOnce(concurrent, () => createReady(server));
      const rate = summarize([made.length / ((performance.now() - t) / 1000)], { rate: true });
      await Promise.all(made.map((m) => kill(server, m.id)));
      const bareRate = summarize(bareRuns.samples.map((ms) => 1000 / ms), { rate: true });
      rows.push(row({ suite: 'server', name: `${concurrent} concurrent creates, ${label}`, unit: 'sandboxes/s', value: rate, baseline: bareRate, baselineName: 'bare `runc run true` one after another', failed: failures(failed, concurrent) }));
    } finally {
      await closing.run();
    }
  }
  return rows;
}
