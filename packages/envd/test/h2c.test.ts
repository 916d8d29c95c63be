// The same port speaks cleartext HTTP/2 to clients that start with its preface.
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Filesystem, Process } from '@paddock/models';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:http2';
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

test('files up and down over h2c: a download larger than one read arrives whole', async () => {
  const session = connect(envd.url);
  const call = (method: string, path: string, body?: Buffer) =>
    new Promise<{ status: number; body: Buffer; error?: Error }>((resolve) => {
      const stream = session.request({ ':method': method, ':path': path, ...(body ? { 'content-type': 'application/octet-stream' } : {}) });
      const chunks: Buffer[] = [];
      let status = 0;
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => resolve({ status, body: Buffer.concat(chunks) }));
      stream.on('error', (error: Error) => resolve({ status, body: Buffer.concat(chunks), error }));
      stream.end(body);
    });
  try {
    const content = randomBytes(5 * 1024 * 1024 + 3);
    expect((await call('POST', '/files?path=h2.bin&username=user', content)).status).toBe(200);
    const got = await call('GET', '/files?path=h2.bin&username=user');
    expect([got.status, got.error, got.body.length]).toEqual([200, undefined, content.length]);
    expect(got.body.equals(content)).toBe(true);
  } finally {
    session.close();
  }
});
