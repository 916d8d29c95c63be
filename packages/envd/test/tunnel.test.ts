// The port tunnel: CONNECT on a unix socket reaches TCP ports of the sandbox.
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
let app: Server;
let appPort: number;
let tunnelSocket: string;

beforeAll(async () => {
  app = createServer((req, res) => res.end(`hello from ${req.url}`));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appPort = (app.address() as { port: number }).port;
  tunnelSocket = join('/tmp', `envd-tunnel-${process.pid}.sock`);
  envd = await startEnvd({ extraArgs: ['--tunnel-socket', tunnelSocket] });
});
afterAll(async () => {
  await envd.stop();
  app.close();
});

function tunnel(target: string, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(tunnelSocket);
    let data = '';
    sock.on('data', (d) => {
      data += d.toString();
      if (data.startsWith('HTTP/1.1 200 Connection Established\r\n\r\n') && !data.includes('\r\n\r\n', 40)) {
        sock.write(payload);
      }
    });
    sock.on('end', () => resolve(data));
    sock.on('error', reject);
    sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

test('CONNECT 127.0.0.1:PORT reaches a server listening on that port', async () => {
  const out = await tunnel(`127.0.0.1:${appPort}`, 'GET /via-tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  expect(out).toMatch(/^HTTP\/1.1 200 Connection Established\r\n\r\nHTTP\/1.1 200 OK/);
  expect(out).toContain('hello from /via-tunnel');
});

test('a closed port answers 502 with a JSON body; other hosts are refused', async () => {
  const closed = await tunnel('127.0.0.1:1', '');
  expect(closed).toMatch(/^HTTP\/1.1 502/);
  expect(closed).toContain('"message":"nothing is listening on port 1 in the sandbox');
  const other = await tunnel('10.0.0.1:80', '');
  expect(other).toMatch(/^HTTP\/1.1 400/);
  expect(other).toContain("tunnel target '10.0.0.1:80' must be 127.0.0.1:PORT");
});
