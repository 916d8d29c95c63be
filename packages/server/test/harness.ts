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

export const API_KEY = 'e2b_00000000000000000000000000000000000000aa';

export interface TestServer {
  server: PaddockServer;
  control: ControlClient;
  home: string;
  /** Stops the server, destroys its sandboxes and checks nothing is left on the host. */
  teardown(): Promise<void>;
}

export async function testServer(opts: StartOptions = {}): Promise<TestServer> {
  const home = opts.home ?? mkdtempSync(join(tmpdir(), 'paddock-srv-'));
  const server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 0, metricsIntervalMs: 500, initialApiKey: API_KEY, ...opts });
  const control = new ControlClient({ apiUrl: server.apiUrl, apiKey: API_KEY, retries: { maxRetries: 0 } });
  return {
    server,
    control,
    home,
    async teardown() {
      await server.close();
      const runtime = server.runtime as RuncRuntime;
      await runtime.removeEverything();
      expect(await runtime.leftovers()).toEqual([]);
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

export { eventually, sleep } from '../../../tools/testing/poll.mjs';
