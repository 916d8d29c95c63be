// The same port speaks cleartext HTTP/2 to clients that start with its preface.
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Filesystem, Process } from '@paddock/models';
import { startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd({ token: null });
});
afterAll(() => envd.stop());

test('unary and streaming RPCs work over h2c', async () => {
  const transport = createConnectTransport({ baseUrl: envd.url, httpVersion: '2' });
  const { entry } = await createClient(Filesystem, transport).stat({ path: '/' });
  expect(entry?.path).toBe('/');
  let out = '';
  for await (const r of createClient(Process, transport).start({ process: { cmd: 'echo', args: ['over h2'] }, stdin: false })) {
    if (r.event?.event.case === 'data' && r.event.event.value.output.case === 'stdout') out += Buffer.from(r.event.event.value.output.value).toString();
  }
  expect(out).toBe('over h2\n');
});
