// A real Paddock server for the SDK's end-to-end suites, on a data directory
// of its own. Its teardown removes every sandbox, checks that nothing is
// left on the host, and audits the server's log (JSON lines, no key or
// token in any).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuncRuntime } from '@paddock/runtime';
import { startServer, type PaddockServer, type StartOptions } from '@paddock/server';
import type { ConnectionOpts } from '../../src/index.js';
import { auditLog, storedTokens } from '../../../../tools/testing/log-audit.mjs';

export const API_KEY = 'e2b_5dc5dc5dc5dc5dc5dc5dc5dc5dc5dc5dc5dc5dc5';

export interface RealServer {
  server: PaddockServer;
  /** What the SDK needs to reach it. */
  opts: ConnectionOpts;
  teardown(): Promise<void>;
}

export async function realServer(name: string, options: StartOptions = {}): Promise<RealServer> {
  const home = mkdtempSync(join(tmpdir(), `paddock-sdk-${name}-`));
  const logFile = join(home, 'server.log');
  const server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 1, initialApiKey: API_KEY, logFile, shutdownGraceMs: 1_000, ...options });
  return {
    server,
    opts: { apiUrl: server.apiUrl, apiKey: API_KEY, sandboxUrl: server.proxyUrl },
    async teardown() {
      await server.close();
      const runtime = server.runtime as RuncRuntime;
      await runtime.removeEverything();
      expect(await runtime.leftovers()).toEqual([]);
      auditLog(logFile, [API_KEY, ...(await storedTokens(home))]);
      rmSync(home, { recursive: true, force: true });
    },
  };
}
