// A Paddock server started by the suite itself, and the three environment
// variables that point the official e2b SDK at it, as a user would set them.
import { Sandbox } from 'e2b';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isHostAdmin } from '@paddock/runtime';
import { startServer, type PaddockServer, type StartOptions } from '@paddock/server';
import { CODE_INTERPRETER_API_KEY } from '../../../tools/testing/code-interpreter.mjs';
import { auditLog, storedTokens } from '../../../tools/testing/log-audit.mjs';

// The code-interpreter test's kept data directory has this key in its store (tools/testing/code-interpreter.mjs).
export const API_KEY = CODE_INTERPRETER_API_KEY;

export interface CompatServer {
  server: PaddockServer;
  teardown(): Promise<void>;
}

/**
 * A server on a new data directory, or on `options.home` when given (kept
 * afterwards: a test that reuses what an earlier run built there).
 */
export async function startForE2b(options: StartOptions = {}): Promise<CompatServer> {
  const scratch = mkdtempSync(join(tmpdir(), 'paddock-compat-'));
  const home = options.home ?? scratch;
  const logFile = join(scratch, 'server.log');
  const server = await startServer({ apiPort: 0, proxyPort: 0, warmPoolSize: 1, metricsIntervalMs: 500, initialApiKey: API_KEY, logFile, shutdownGraceMs: 1_000, ...options, home });
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
      const runtime = server.runtime;
      if (!isHostAdmin(runtime)) throw new Error('the server runs a runtime without HostAdmin: nothing can check it left nothing behind');
      await runtime.removeEverything();
      expect(await runtime.leftovers()).toEqual([]);
      // JSON lines, and no key or token the server handed out in any.
      auditLog(server.config.logFile ?? logFile, [API_KEY, ...(server.createdAdminKey ? [server.createdAdminKey] : []), ...(await storedTokens(home))]);
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/** A server and one sandbox of the base template on it, for a test file that shares one; the teardown kills it first. */
export async function startWithSandbox(): Promise<{ sbx: Sandbox; teardown(): Promise<void> }> {
  const c = await startForE2b();
  const sbx = await Sandbox.create('base');
  return {
    sbx,
    async teardown() {
      await sbx.kill();
      await c.teardown();
    },
  };
}

export { eventually, sleep } from '../../../tools/testing/poll.mjs';
