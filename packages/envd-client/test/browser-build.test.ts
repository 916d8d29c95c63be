// The browser build (src/browser.ts, the `browser` export condition): what
// esbuild bundles from it for a browser, and its client run here in Node
// over fetch and connect-web against a Connect server and plain HTTP routes.
// The SDK's downstream check (tools/packaging/downstream.mjs) runs it in
// Chromium against a real server.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { build } from 'esbuild';
import { FileType, Filesystem, Process } from '@paddock/models';
import { EnvdArgumentError, EnvdClient } from '../src/browser.js';
import { EnvdClient as NodeEnvdClient } from '../src/index.js';

let seen: { url: string; headers: Record<string, string | string[] | undefined> }[] = [];

function routes(router: ConnectRouter): void {
  router.service(Filesystem, {
    stat(req) {
      return { entry: { name: req.path.slice(1), path: req.path, type: FileType.FILE, size: 7n } };
    },
  });
  router.service(Process, {
    async *start() {
      yield { event: { event: { case: 'data', value: { output: { case: 'stdout', value: new TextEncoder().encode('hi\n') } } } } };
      yield { event: { event: { case: 'end', value: { exitCode: 0, exited: true, status: 'done' } } } };
    },
  });
}

const connect = connectNodeAdapter({ routes });
let server: Server;
let url: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    if (req.url?.split('?')[0] === '/files') {
      if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('file text');
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([{ name: 'a', path: '/a', type: 'file' }])));
      return;
    }
    connect(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen = [];
});

test('esbuild bundles the browser entry for a browser: no Node built-ins, no undici, no connect-node', async () => {
  const out = await build({
    entryPoints: [join(import.meta.dirname, '../src/browser.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(out.metafile.inputs);
  expect(inputs.filter((p) => /node_modules\/(undici|@connectrpc\/connect-node)\//.test(p) || /src\/(node|http-node|node-transport)\.ts$/.test(p))).toEqual([]);
  expect(inputs.some((p) => p.includes('@connectrpc/connect-web'))).toBe(true);
});

test('the Node entry is not browser-clean (the bundle check above can fail)', async () => {
  const err = await build({
    entryPoints: [join(import.meta.dirname, '../src/index.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'silent',
  }).catch((e: unknown) => e);
  expect(String(err)).toMatch(/Could not resolve "node:/);
});

test('Connect calls go over connect-web (fetch), with envd headers', async () => {
  const envd = new EnvdClient({ envdUrl: url, accessToken: 'tok', sandboxId: 'sbx1', useBinaryFormat: true });
  expect(envd).not.toBeInstanceOf(NodeEnvdClient);
  const { entry } = await envd.filesystem.stat({ path: '/x' });
  expect(entry).toMatchObject({ name: 'x', size: 7n });
  const out: string[] = [];
  for await (const m of envd.process.start({ process: { cmd: 'echo' } })) {
    if (m.event?.event.case === 'data' && m.event.event.value.output.case === 'stdout') out.push(new TextDecoder().decode(m.event.event.value.output.value));
  }
  expect(out).toEqual(['hi\n']);
  expect(seen[0]).toMatchObject({ url: '/filesystem.Filesystem/Stat', headers: { 'x-access-token': 'tok', 'e2b-sandbox-id': 'sbx1' } });
});

test('the HTTP routes go over fetch: download and upload', async () => {
  const envd = new EnvdClient({ envdUrl: url });
  await expect(envd.download('/a.txt')).resolves.toBe('file text');
  await expect(envd.upload('/a', 'data')).resolves.toEqual([{ name: 'a', path: '/a', type: 'file' }]);
  expect(seen.map((s) => s.url)).toEqual(['/files?path=%2Fa.txt', '/files?path=%2Fa']);
});

test("'node-stream' downloads and Node-only options are refused by name", async () => {
  const envd = new EnvdClient({ envdUrl: url });
  // As a JavaScript caller would ask: this build's types have no 'node-stream'.
  const nodeStream = { format: 'node-stream' } as unknown as { format: 'stream' };
  await expect(envd.download('/a.txt', nodeStream)).rejects.toThrow(EnvdArgumentError);
  await expect(envd.download('/a.txt', nodeStream)).rejects.toThrow(/'node-stream' needs Node/);
  expect(() => new EnvdClient({ envdUrl: url, socketPath: '/run/envd.sock' })).toThrow(/socketPath needs Node/);
  expect(() => new EnvdClient({ envdUrl: url, httpVersion: '2' })).toThrow(/httpVersion '2' needs Node/);
});
