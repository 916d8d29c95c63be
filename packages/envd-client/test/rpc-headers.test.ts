// A tiny connect-node router stands in for envd: it implements Stat (unary)
// and Start (server stream) and records the headers each call arrives with.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError, type ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { createConnectTransport as createWebTransport } from '@connectrpc/connect-web';
import { FileType, Filesystem, Process } from '@paddock/models';
import { EnvdClient, basicAuthorization, withUser, type EnvdClientOptions } from '../src/index.js';

let server: Server;
let baseUrl: string;
const seen: { method: string; headers: Headers }[] = [];

function routes(router: ConnectRouter): void {
  router.service(Filesystem, {
    stat(req, ctx) {
      seen.push({ method: 'Stat', headers: ctx.requestHeader });
      if (req.path === '/missing') throw new ConnectError('path /missing not found', Code.NotFound);
      return { entry: { name: 'a.txt', path: req.path, type: FileType.FILE } };
    },
  });
  router.service(Process, {
    async *start(req, ctx) {
      seen.push({ method: 'Start', headers: ctx.requestHeader });
      yield { event: { event: { case: 'start', value: { pid: 42 } } } };
      yield { event: { event: { case: 'end', value: { exitCode: 0, exited: true, status: `ran ${req.process?.cmd}` } } } };
    },
  });
}

beforeAll(async () => {
  server = createServer(connectNodeAdapter({ routes }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen.length = 0;
});

function client(options: Partial<EnvdClientOptions> = {}): EnvdClient {
  return new EnvdClient({ envdUrl: baseUrl, ...options });
}

async function runStart(c: EnvdClient): Promise<string[]> {
  const events: string[] = [];
  for await (const res of c.process.start({ process: { cmd: '/bin/true' } })) events.push(res.event?.event.case ?? '?');
  return events;
}

const basic = (user: string): string => `Basic ${Buffer.from(`${user}:`).toString('base64')}`;

describe('headers of RPCs', () => {
  test('token, sandbox routing and the default user arrive on a unary call, in JSON', async () => {
    const c = client({ accessToken: 'tok-1', sandboxId: 'sbx-1', user: 'user' });
    const res = await c.filesystem.stat({ path: '/home/user/a.txt' });
    expect(res.entry?.name).toBe('a.txt');
    const h = seen[0]?.headers ?? new Headers();
    expect(h.get('x-access-token')).toBe('tok-1');
    expect(h.get('e2b-sandbox-id')).toBe('sbx-1');
    expect(h.get('e2b-sandbox-port')).toBe('49983');
    expect(h.get('authorization')).toBe('Basic dXNlcjo=');
    expect(h.get('content-type')).toBe('application/json');
    expect(h.get('keepalive-ping-interval')).toBeNull();
  });

  test('a user chosen per call overrides the default user', async () => {
    const c = client({ user: 'user' });
    await c.filesystem.stat({ path: '/etc/hosts' }, withUser('root'));
    expect(seen[0]?.headers.get('authorization')).toBe(basic('root'));
    expect(basicAuthorization('root')).toBe(basic('root'));
  });

  test('nothing optional is sent when nothing is configured', async () => {
    await client().filesystem.stat({ path: '/x' });
    const h = seen[0]?.headers ?? new Headers();
    for (const name of ['x-access-token', 'e2b-sandbox-id', 'e2b-sandbox-port', 'authorization']) {
      expect(h.get(name)).toBeNull();
    }
  });

  test('a custom sandbox port and extra headers are sent', async () => {
    await client({ sandboxId: 'sbx-2', sandboxPort: 8080, headers: { 'User-Agent': 'paddock-test' } }).filesystem.stat({ path: '/x' });
    expect(seen[0]?.headers.get('e2b-sandbox-port')).toBe('8080');
    expect(seen[0]?.headers.get('user-agent')).toBe('paddock-test');
  });

  test('server streams carry Keepalive-Ping-Interval, 50 s by default', async () => {
    await expect(runStart(client({ accessToken: 't' }))).resolves.toEqual(['start', 'end']);
    expect(seen[0]?.headers.get('keepalive-ping-interval')).toBe('50');
    expect(seen[0]?.headers.get('content-type')).toBe('application/connect+json');
    expect(seen[0]?.headers.get('x-access-token')).toBe('t');
  });

  test('the keepalive interval is configurable, and 0 leaves it out', async () => {
    await runStart(client({ keepalivePingIntervalSec: 15 }));
    await runStart(client({ keepalivePingIntervalSec: 0 }));
    expect(seen.map((s) => s.headers.get('keepalive-ping-interval'))).toEqual(['15', null]);
  });

  test('useBinaryFormat switches to the protobuf binary format', async () => {
    const res = await client({ useBinaryFormat: true }).filesystem.stat({ path: '/bin' });
    expect(res.entry?.path).toBe('/bin');
    expect(seen[0]?.headers.get('content-type')).toBe('application/proto');
  });

  test('an injected transport (connect-web, as in a browser) gets the same headers', async () => {
    const c = client({ accessToken: 'tok-web', sandboxId: 'sbx-web', createTransport: createWebTransport });
    await expect(runStart(c)).resolves.toEqual(['start', 'end']);
    const h = seen[0]?.headers ?? new Headers();
    expect(h.get('x-access-token')).toBe('tok-web');
    expect(h.get('e2b-sandbox-id')).toBe('sbx-web');
    expect(h.get('keepalive-ping-interval')).toBe('50');
  });
});

describe('RPC errors', () => {
  test('are left as ConnectError with their code', async () => {
    const err = await client().filesystem.stat({ path: '/missing' }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.NotFound);
    expect(ConnectError.from(err).rawMessage).toBe('path /missing not found');
  });
});
