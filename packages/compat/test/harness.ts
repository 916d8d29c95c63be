// A Paddock server started by the suite itself, and the three environment
// variables that point the official e2b SDK at it, as a user would set them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuncRuntime } from '@paddock/runtime';
import { startServer, type PaddockServer } from '@paddock/server';

export const API_KEY = 'e2b_c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';

export interface CompatServer {
  server: PaddockServer;
  teardown(): Promise<void>;
}

export async function startForE2b(): Promise<CompatServer> {
  const home = mkdtempSync(join(tmpdir(), 'paddock-compat-'));
  const server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 1, metricsIntervalMs: 500, initialApiKey: API_KEY });
  process.env.E2B_API_URL = server.apiUrl;
  process.env.E2B_SANDBOX_URL = server.proxyUrl;
  process.env.E2B_API_KEY = API_KEY;
  return {
    server,
    async teardown() {
      delete process.env.E2B_API_URL;
      delete process.env.E2B_SANDBOX_URL;
      delete process.env.E2B_API_KEY;
      await server.close();
      const runtime = server.runtime as RuncRuntime;
      await runtime.removeEverything();
      expect(await runtime.leftovers()).toEqual([]);
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function eventually(check: () => Promise<boolean> | boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}
