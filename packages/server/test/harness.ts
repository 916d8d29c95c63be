// A real Paddock server for tests: on a temporary home, with the runc
// runtime, driven over HTTP with @paddock/control-client and, for what runs
// inside sandboxes, Connect clients through the sandbox proxy.
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ControlClient } from '@paddock/control-client';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Filesystem, Process } from '@paddock/models';
import type { RuncRuntime } from '@paddock/runtime';
import { startServer, type PaddockServer, type StartOptions } from '../src/index.js';
import { auditLog, storedTokens } from '../../../tools/testing/log-audit.mjs';

export const API_KEY = 'e2b_00000000000000000000000000000000000000aa';
/** The admin credential of test servers. */
export const ADMIN_KEY = 'paddock_admin_00000000000000000000000000000000000000ad';

export interface TestServer {
  server: PaddockServer;
  /** Secrets a test made (keys it created) that the log audit looks for too. */
  extraSecrets: string[];
  control: ControlClient;
  home: string;
  /** Stops the server, destroys its sandboxes and checks nothing is left on the host. */
  teardown(): Promise<void>;
}

export async function testServer(opts: StartOptions = {}): Promise<TestServer> {
  const home = opts.home ?? mkdtempSync(join(tmpdir(), 'paddock-srv-'));
  // Its log is read back at teardown: JSON lines, and no key or token in any.
  const logFile = join(home, 'server.log');
  const server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 0, metricsIntervalMs: 500, initialApiKey: API_KEY, initialAdminKey: ADMIN_KEY, logFile, shutdownGraceMs: 1_000, ...opts });
  const control = new ControlClient({ apiUrl: server.apiUrl, apiKey: API_KEY, retries: { maxRetries: 0 } });
  const extraSecrets: string[] = [];
  return {
    server,
    extraSecrets,
    control,
    home,
    async teardown() {
      await server.close();
      const runtime = server.runtime as RuncRuntime;
      await runtime.removeEverything();
      expect(await runtime.leftovers()).toEqual([]);
      auditLog(server.config.logFile ?? logFile, [API_KEY, ADMIN_KEY, ...extraSecrets, ...(await storedTokens(home))]);
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** Connect clients of a sandbox's envd, through the proxy with the shared-URL headers. */
export function envd(server: PaddockServer, sandboxId: string, token: string | undefined, user?: string): { fs: Client<typeof Filesystem>; proc: Client<typeof Process> } {
  const transport = createConnectTransport({
    baseUrl: server.proxyUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('E2b-Sandbox-Id', sandboxId);
        req.header.set('E2b-Sandbox-Port', '49983');
        if (token) req.header.set('X-Access-Token', token);
        if (user) req.header.set('Authorization', `Basic ${Buffer.from(`${user}:`).toString('base64')}`);
        return next(req);
      },
    ],
  });
  return { fs: createClient(Filesystem, transport), proc: createClient(Process, transport) };
}

/** Runs `bash -l -c script` in a sandbox through the proxy. */
export async function run(server: PaddockServer, sandboxId: string, token: string | undefined, script: string): Promise<{ stdout: string; exitCode: number }> {
  let stdout = '';
  let exitCode = NaN;
  for await (const r of envd(server, sandboxId, token).proc.start({ process: { cmd: '/bin/bash', args: ['-l', '-c', script] }, stdin: false })) {
    const ev = r.event?.event;
    if (ev?.case === 'data' && ev.value.output.case === 'stdout') stdout += Buffer.from(ev.value.output.value).toString();
    if (ev?.case === 'end') exitCode = ev.value.exitCode;
  }
  return { stdout, exitCode };
}

/**
 * A call of the control API with the test key: the status and the parsed
 * body, which tests read by field and hold to their expected shapes.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the assertions, not a type, say what a body holds
export async function api(server: PaddockServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.apiUrl}${path}`, {
    method,
    headers: { 'x-api-key': API_KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface BuildStatus {
  status: 'waiting' | 'building' | 'ready' | 'error';
  logEntries: Array<{ level: string; message: string; step?: string }>;
  reason?: { message: string; step?: string; logEntries: Array<{ message: string }> };
}

/** Polls a build's status (as the SDKs do, by `logsOffset`) until it ends; its whole log. */
export async function finishedBuild(server: PaddockServer, templateId: string, buildId: string): Promise<BuildStatus> {
  const entries: BuildStatus['logEntries'] = [];
  const page = async () => (await api(server, 'GET', `/templates/${templateId}/builds/${buildId}/status?logsOffset=${entries.length}`)).body as BuildStatus;
  for (let i = 0; i < 1200; i++) {
    const status = await page();
    entries.push(...status.logEntries);
    if (status.status === 'ready' || status.status === 'error') {
      // The entries of the end may come in one more page.
      for (let more = status; more.logEntries.length > 0; ) {
        more = await page();
        entries.push(...more.logEntries);
      }
      return { ...status, logEntries: entries };
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`build ${buildId} did not end`);
}

export { eventually, sleep } from '../../../tools/testing/poll.mjs';
