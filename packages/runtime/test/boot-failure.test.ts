// A sandbox whose envd does not come up: the create fails with what envd
// said, as soon as its container has exited (not when the wait for envd runs
// out), or, when envd runs on without ever listening, once that wait ran out;
// either way nothing of the sandbox is left. envd here is a script in place
// of the real one, in a copy of envd's directory: run by the same node,
// through the same loader, with the same flags.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envdSandboxDir } from '@paddock/envd';
import { testRuntime, TOKEN, type TestRuntime } from './harness.js';

let fakeEnvd: string;
let t: TestRuntime | undefined;
beforeEach(() => {
  fakeEnvd = mkdtempSync(join(tmpdir(), 'paddock-fake-envd-'));
});
afterEach(async () => {
  await t?.teardown();
  t = undefined;
  rmSync(fakeEnvd, { recursive: true, force: true });
});

/** A runtime whose sandboxes run `script` as their envd. */
async function runtimeWithEnvd(script: string, readyTimeoutMs: number): Promise<TestRuntime> {
  cpSync(envdSandboxDir, fakeEnvd, { recursive: true, verbatimSymlinks: true });
  writeFileSync(join(fakeEnvd, 'envd', 'main.cjs'), script);
  t = await testRuntime({ envdSandboxDir: fakeEnvd, readyTimeoutMs, warmPoolSize: 0 });
  return t;
}

// The runtime's spare disks, made in the background while it runs, are not a failed boot's.
const sandboxDirs = async (rt: TestRuntime) =>
  (await rt.runtime.leftovers()).filter((l) => (l.startsWith('directory ') && !l.startsWith('directory spare-disks/')) || l.startsWith('runc container'));

test('an envd that exits at once fails the create with its last words, not when the wait for it runs out', async () => {
  // Were the exit not seen, the create would fail after ten minutes, saying so, and the test would time out first.
  const rt = await runtimeWithEnvd(`process.stderr.write('envd: cannot open the socket directory\\n'); process.exit(3);`, 600_000);
  const failed = rt.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } });
  await expect(failed).rejects.toMatchObject({ kind: 'unavailable' });
  await expect(failed).rejects.toThrow(/envd did not start: the container exited; envd log: .*envd: cannot open the socket directory/s);
  expect(await sandboxDirs(rt)).toEqual([]);
});

test('an envd that runs but never listens fails the create once the wait for it ran out', async () => {
  const rt = await runtimeWithEnvd(`process.stderr.write('envd: waiting for nothing\\n'); setInterval(() => {}, 1000);`, 1_500);
  await expect(rt.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })).rejects.toThrow(/envd did not answer on .*envd\.sock within 1500 ms/);
  expect(await sandboxDirs(rt)).toEqual([]);
});
