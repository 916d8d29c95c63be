// A server killed with SIGKILL loses nothing: a new server on the same data
// directory finds every sandbox in the state it was in, with its files and
// tokens, and expires what expired while it was down.
import { ControlClient } from '@paddock/control-client';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { RuncRuntime } from '@paddock/runtime';
import { API_KEY, api, eventually, run, sleep } from './harness.js';
import type { PaddockServer } from '../src/index.js';

const home = mkdtempSync(join(tmpdir(), 'paddock-srv-restart-'));
/** Servers started by this file; one a failed test left running is killed in afterAll. */
const children = new Set<ChildProcess>();

async function serverProcess(): Promise<{ child: ChildProcess; apiUrl: string; proxyUrl: string; control: ControlClient }> {
  const options = { home, apiPort: 0, proxyPort: 0, warmPoolSize: 0, metricsIntervalMs: 500, initialApiKey: API_KEY };
  const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures/server-process.mjs'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
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
  for (const child of children) await kill9(child);
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
  const vanished = await first.control.createSandbox({ templateID: 'base', metadata: { which: 'vanished' } });
  const stoppedBehind = await first.control.createSandbox({ templateID: 'base', metadata: { which: 'stopped' } });
  const srv1 = { proxyUrl: first.proxyUrl } as PaddockServer;
  for (const s of [running, paused, fsOnly]) {
    expect((await run(srv1, s.sandboxID, s.envdAccessToken, `echo ${s.sandboxID} > ~/id; (sleep 1000 &)`)).exitCode).toBe(0);
  }
  await first.control.pauseSandbox(paused.sandboxID);
  await first.control.pauseSandbox(fsOnly.sandboxID, { memory: false });
  expect((await run(srv1, stoppedBehind.sandboxID, stoppedBehind.envdAccessToken, 'echo kept > ~/f')).exitCode).toBe(0);
  await kill9(first.child);
  // While no server is up: one sandbox is removed from the host behind the
  // store's back, another's container is stopped (as a host reboot would),
  // and the expiring sandbox's time runs out.
  const host = new RuncRuntime({ dataDir: join(home, 'runtime') });
  await host.destroy(vanished.sandboxID);
  await host.stop(stoppedBehind.sandboxID);
  expect(await host.get(vanished.sandboxID)).toBeUndefined();
  expect((await host.get(stoppedBehind.sandboxID))?.status).toBe('stopped');
  await sleep(3500);

  const second = await serverProcess();
  const srv2 = { proxyUrl: second.proxyUrl } as PaddockServer;
  const states = Object.fromEntries((await second.control.listSandboxes({ limit: 100 })).items.map((s) => [s.sandboxID, s.state]));
  // The vanished sandbox is marked killed (gone from the list, 404, 502 through
  // the proxy); the stopped one is paused and keeps its files.
  expect(states).toEqual({
    [running.sandboxID]: 'running',
    [paused.sandboxID]: 'paused',
    [fsOnly.sandboxID]: 'paused',
    [stoppedBehind.sandboxID]: 'paused',
  });
  await expect(second.control.getSandbox(expiring.sandboxID)).rejects.toMatchObject({ status: 404 });
  await expect(second.control.getSandbox(vanished.sandboxID)).rejects.toMatchObject({ status: 404 });
  expect((await second.control.listSandboxes({ state: ['running'] })).items.map((s) => s.sandboxID)).not.toContain(vanished.sandboxID);
  const gone = await fetch(`${second.proxyUrl}/health`, { headers: { 'E2b-Sandbox-Id': vanished.sandboxID, 'E2b-Sandbox-Port': '49983' } });
  expect([gone.status, await gone.json()]).toEqual([502, { sandboxId: vanished.sandboxID, message: 'The sandbox was not found', code: 502 }]);
  expect((await second.control.getSandboxLogs(vanished.sandboxID, {})).logs.map((l) => l.message)).toContain(
    'sandbox vanished from the host while the server was down',
  );
  expect((await second.control.getSandboxLogs(stoppedBehind.sandboxID, {})).logs.map((l) => l.message)).toContain(
    'sandbox found stopped after a restart; marked paused',
  );
  await second.control.connectSandbox(stoppedBehind.sandboxID, { timeout: 60 });
  expect((await run(srv2, stoppedBehind.sandboxID, stoppedBehind.envdAccessToken, 'cat ~/f')).stdout).toBe('kept\n');

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

test('SIGKILL of the server mid-build: the next server fails the build, and nothing of its step containers or of their network is left', async () => {
  const first = await serverProcess();
  const srv1 = { apiUrl: first.apiUrl } as PaddockServer;
  const req = await api(srv1, 'POST', '/v3/templates', { name: 'killed-mid-build' });
  const { templateID, buildID } = req.body;
  await api(srv1, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['echo first > /opt/first', 'root'] }, { type: 'RUN', args: ['echo going; sleep 600', 'root'] }] });
  // Killed while the second step's command runs, in the network the build holds.
  await eventually(
    async () => (await api(srv1, 'GET', `/templates/${templateID}/builds/${buildID}/status?logsOffset=0`)).body.logEntries.some((e: { message: string }) => e.message === 'going'),
    "the build's second step",
    60_000,
  );
  const stepDirs = () => readdirSync(join(home, 'runtime/sandboxes')).filter((id) => (JSON.parse(readFileSync(join(home, 'runtime/sandboxes', id, 'spec.json'), 'utf8')) as { step?: boolean }).step);
  const held = stepDirs();
  // The step container and the network its build holds.
  expect(held.length).toBeGreaterThanOrEqual(2);
  await kill9(first.child);

  const second = await serverProcess();
  const srv2 = { apiUrl: second.apiUrl } as PaddockServer;
  const { body } = await api(srv2, 'GET', `/templates/${templateID}/builds/${buildID}/status`);
  expect(body).toMatchObject({ status: 'error', reason: { message: 'the server stopped while the build ran; start the build again' } });
  expect(stepDirs()).toEqual([]);
  const records = join(home, 'runtime/network/slots');
  const holders = readdirSync(records).filter((f) => f.endsWith('.json')).map((f) => (JSON.parse(readFileSync(join(records, f), 'utf8')) as { sandboxId: string }).sandboxId);
  for (const id of held) expect(holders).not.toContain(id);
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
  for (const id of held) expect(mounts).not.toContain(id);
  const host = new RuncRuntime({ dataDir: join(home, 'runtime') });
  for (const id of held) expect(host.leftoverCgroups().filter((d) => d.includes(id))).toEqual([]);
  expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toMatch(/^sleep 600$/m);
  await kill9(second.child);
}, 180_000);
