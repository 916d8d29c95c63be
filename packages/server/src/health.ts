// Liveness and readiness, part by part: what an orchestrator's probes and
// an operator read. Ready means a create would find each part it needs
// working: the store writable, the runtime able to make sandboxes, room on
// the data directory's disk, and the sandbox network up.
import { hasHealth, type HealthCheck, type Runtime } from '@paddock/runtime';
import { statfs } from 'node:fs/promises';
import type { Repositories } from './store/repositories.js';

export interface HealthReport {
  status: 'ok' | 'unavailable';
  checks: Record<string, HealthCheck>;
}

/** How long the store's write lock is waited for by a probe, ms: a probe answers fast or says why not. */
const STORE_PROBE_MS = 1_000;
/** Below this much free space on the data directory's disk the server is not ready: a create or build could not finish. */
export const MIN_FREE_BYTES = 512 * 1024 ** 2;

const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GiB`;

export class Health {
  constructor(
    private readonly store: Pick<Repositories, 'probe'>,
    private readonly runtime: Runtime,
    private readonly home: string,
  ) {}

  async ready(): Promise<HealthReport> {
    const checks: Record<string, HealthCheck> = {
      store: await this.storeCheck(),
      disk: await this.diskCheck(),
      ...(await this.runtimeChecks()),
    };
    return { status: Object.values(checks).every((c) => c.ok) ? 'ok' : 'unavailable', checks };
  }

  private async storeCheck(): Promise<HealthCheck> {
    try {
      await this.store.probe(STORE_PROBE_MS);
      return { ok: true, detail: 'writable' };
    } catch (err) {
      return { ok: false, detail: `cannot be written: ${(err as Error).message}` };
    }
  }

  private async diskCheck(): Promise<HealthCheck> {
    try {
      const fs = await statfs(this.home);
      const free = fs.bavail * fs.bsize;
      const total = fs.blocks * fs.bsize;
      const detail = `${gib(free)} free of ${gib(total)} on ${this.home}`;
      return free < MIN_FREE_BYTES ? { ok: false, detail: `${detail}; at least ${gib(MIN_FREE_BYTES)} is needed` } : { ok: true, detail };
    } catch (err) {
      return { ok: false, detail: `${this.home}: ${(err as Error).message}` };
    }
  }

  private async runtimeChecks(): Promise<Record<string, HealthCheck>> {
    if (!hasHealth(this.runtime)) return { runtime: { ok: true, detail: 'the runtime reports no health of its own' } };
    try {
      return await this.runtime.health();
    } catch (err) {
      return { runtime: { ok: false, detail: (err as Error).message } };
    }
  }
}
