// A server killed with SIGKILL loses nothing: a new server on the same data
// directory finds every sandbox in the state it was in, with its files and
// tokens, and expires what expired while it was down.
import { ControlClient } from '@paddock/control-client';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { RuncRuntime } from '@paddock/runtime';
import { API_KEY, eventually, run, sleep } from './harness.js';
import type { PaddockServer } from '../src/index.js';

const home = mkdtempSync(join(tmpdir(), 'paddock-srv-restart-'));

async function serverProcess(): Promise<{ child: ChildProcess; apiUrl: string; proxyUrl: string; control: ControlClient }> {
  const options = { home, apiPort: 0, proxyPort: 0, warmPoolSize: 0, metricsIntervalMs: 500, initialApiKey: API_KEY };
  const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures/server-process.mjs'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const urls = await new Promise<{ apiUrl: string; proxyUrl: string }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l) as { apiUrl: string; proxyUrl: string }));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return { child, ...urls, control: new ControlClient({ apiUrl: urls.apiUrl, apiKey: API_KEY, retries: { maxRetries: 0 } }) };
}

async function kill9(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

afterAll(async () => {
  const runtime = new RuncRuntime({ dataDir: join(home, 'runtime') });
  await runtime.removeEverything();
  expect(await runtime.leftovers()).toEqual([]);
  rmSync(home, { recursive: true, force: true });
});

test('SIGKILL of the server: sandboxes keep their state, tokens and files; expiry still applies', async () => {
  const first = await serverProcess();
  const running = await first.control.createSandbox({ templateID: 'base', metadata: { which: 'running' } });
  const paused = await first.control.createSandbox({ templateID: 'base', metadata: { which: 'paused' } });
  const fsOnly = await first.control.createSandbox({ templateID: 'base', metadata: { which: 'fs-only' } });
  const expiring = await first.control.createSandbox({ templateID: 'base', timeout: 3 });
  const srv1 = { proxyUrl: first.proxyUrl } as PaddockServer;
  for (const s of [running, paused, fsOnly]) {
    expect((await run(srv1, s.sandboxID, s.envdAccessToken, `echo ${s.sandboxID} > ~/id; (sleep 1000 &)`)).exitCode).toBe(0);
  }
  await first.control.pauseSandbox(paused.sandboxID);
  await first.control.pauseSandbox(fsOnly.sandboxID, { memory: false });
  await kill9(first.child);
  // The expiring sandbox's time runs out while no server is up.
  await sleep(3500);

  const second = await serverProcess();
  const srv2 = { proxyUrl: second.proxyUrl } as PaddockServer;
  const states = Object.fromEntries((await second.control.listSandboxes({ limit: 100 })).items.map((s) => [s.sandboxID, s.state]));
  expect(states).toEqual({ [running.sandboxID]: 'running', [paused.sandboxID]: 'paused', [fsOnly.sandboxID]: 'paused' });
  await expect(second.control.getSandbox(expiring.sandboxID)).rejects.toMatchObject({ status: 404 });

  // The old token still opens the running sandbox; its process survived.
  expect((await run(srv2, running.sandboxID, running.envdAccessToken, 'cat ~/id; pgrep -x sleep | wc -l')).stdout).toBe(`${running.sandboxID}\n1\n`);
  // Paused with memory: resumes with its process; filesystem-only: files only.
  await second.control.connectSandbox(paused.sandboxID, { timeout: 60 });
  expect((await run(srv2, paused.sandboxID, paused.envdAccessToken, 'cat ~/id; pgrep -x sleep | wc -l')).stdout).toBe(`${paused.sandboxID}\n1\n`);
  await second.control.connectSandbox(fsOnly.sandboxID, { timeout: 60 });
  expect((await run(srv2, fsOnly.sandboxID, fsOnly.envdAccessToken, 'cat ~/id; pgrep -x sleep | wc -l')).stdout).toBe(`${fsOnly.sandboxID}\n0\n`);
  // Metrics keep coming after the restart.
  await eventually(async () => (await second.control.getSandboxMetrics(running.sandboxID, {})).length >= 2, 'metric samples');

  const stopped = new Promise((r) => second.child.once('exit', r));
  second.child.kill('SIGTERM');
  await stopped;
});
