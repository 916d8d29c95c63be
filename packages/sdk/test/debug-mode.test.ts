// `debug`: the SDK against one envd on this machine with no control API, as
// E2B's SDK does for a locally run envd. A real envd, no access token.
import { createServer } from 'node:net';
import { Sandbox } from '../src/index.js';
import { startLocalEnvd } from '../../../tools/testing/local-envd.mjs';

let envd: { url: string; stop(): Promise<void> };
let noApi: string;

beforeAll(async () => {
  envd = await startLocalEnvd({ prefix: 'sdk-debug-' });
  // A control API URL where nothing listens: any call to it would fail.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  noApi = `http://127.0.0.1:${(probe.address() as { port: number }).port}`;
  await new Promise((resolve) => probe.close(resolve));
});

afterAll(async () => {
  await envd.stop();
});

test('create, connect and kill make no control API call; files and commands reach the envd', async () => {
  const opts = { debug: true, sandboxUrl: envd.url, apiUrl: noApi, retries: 0 };
  const sbx = await Sandbox.create(opts);
  expect(sbx.sandboxId).toBe('debug_sandbox_id');
  await sbx.files.write('/tmp/debug.txt', 'debug mode');
  expect((await sbx.commands.run('cat /tmp/debug.txt')).stdout).toBe('debug mode');
  const again = await Sandbox.connect('whatever', opts);
  expect(await again.files.read('/tmp/debug.txt')).toBe('debug mode');
  expect(await again.connect()).toBe(again);
  await sbx.setTimeout(1000);
  expect(await sbx.kill()).toBe(true);
  expect(await Sandbox.kill('whatever', opts)).toBe(true);
  // Still there: debug kill leaves the envd alone.
  expect(await sbx.isRunning()).toBe(true);
});

test('PADDOCK_DEBUG=true turns it on', async () => {
  process.env.PADDOCK_DEBUG = 'true';
  try {
    const sbx = await Sandbox.create({ sandboxUrl: envd.url, apiUrl: noApi });
    expect(sbx.sandboxId).toBe('debug_sandbox_id');
    expect((await sbx.commands.run('echo from env')).stdout).toBe('from env\n');
  } finally {
    delete process.env.PADDOCK_DEBUG;
  }
});
