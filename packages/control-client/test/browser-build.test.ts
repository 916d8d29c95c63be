// The browser build (src/browser.ts, the `browser` export condition): what
// esbuild bundles from it for a browser, and its client here against a real
// HTTP server. The SDK's downstream check (tools/packaging/downstream.mjs)
// runs it in Chromium against a real Paddock server.
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { build } from 'esbuild';
import { ControlClient } from '../src/browser.js';
import { ControlClient as NodeControlClient } from '../src/index.js';
import { json, startServer, type LocalServer } from './local-server.js';

let server: LocalServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const bundle = (entry: string) =>
  build({ entryPoints: [join(import.meta.dirname, '../src', entry)], bundle: true, format: 'esm', platform: 'browser', write: false, metafile: true, logLevel: 'silent' });

test('esbuild bundles the browser entry for a browser, and not the Node one', async () => {
  const out = await bundle('browser.ts');
  expect(Object.keys(out.metafile.inputs).filter((p) => p.endsWith('src/node.ts'))).toEqual([]);
  expect(String(await bundle('index.ts').catch((e: unknown) => e))).toMatch(/Could not resolve "node:/);
});

test('a template archive goes up as a Blob or a web stream; a path or a Node stream is refused by name', async () => {
  server = await startServer((_req, res) => json(res, 201, {}));
  const client = new ControlClient({ apiUrl: server.url, apiKey: 'k' });
  expect(client).not.toBeInstanceOf(NodeControlClient);
  const url = `${server.url}/templates/tpl/files/${'a'.repeat(64)}/upload`;
  await client.uploadTemplateFiles(url, new Blob(['tar bytes']));
  await client.uploadTemplateFiles(url, new Blob(['tar bytes']).stream(), 9);
  expect(server.requests.map((r) => r.body)).toEqual(['tar bytes', 'tar bytes']);
  await expect(client.uploadTemplateFiles(url, '/tmp/files.tar')).rejects.toThrow(/a path or a Node Readable only in Node/);
  // As a JavaScript caller would pass it: this build's types have no Node Readable.
  await expect(client.uploadTemplateFiles(url, Readable.from(['x']) as unknown as Blob, 1)).rejects.toThrow(/a path or a Node Readable only in Node/);
  expect(server.requests).toHaveLength(2);
});
