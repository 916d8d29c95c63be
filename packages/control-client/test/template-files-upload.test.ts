// uploadTemplateFiles: the PUT of a COPY step's archive to the signed URL
// the server gave, against a real HTTP server that records what arrives.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ControlApiError, ControlClient } from '../src/index.js';
import { json, startServer, type LocalServer, type ReceivedRequest } from './local-server.js';

const ARCHIVE = 'app/main.txt\0'.repeat(100);
const fast = { initialDelayMs: 5, maxDelayMs: 20 };

let server: LocalServer | undefined;
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-upload-'));
  writeFileSync(join(dir, 'files.tar'), ARCHIVE);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A client whose API lives under /api, with a key and headers of its own that must stay off the upload. */
const clientOf = (s: LocalServer) => new ControlClient({ apiUrl: `${s.url}/api`, apiKey: 'pk_secret', headers: { 'X-Client': 'tests' }, retries: fast });
const uploadUrl = (s: LocalServer) => `${s.url}/templates/tpl/files/${'a'.repeat(64)}/upload?expires=99&signature=c2ln`;

const sources: [string, () => Parameters<ControlClient['uploadTemplateFiles']>[1], number | undefined][] = [
  ['a file path', () => join(dir, 'files.tar'), undefined],
  ['a Blob', () => new Blob([ARCHIVE]), undefined],
  ['a Node stream with its size', () => Readable.from([Buffer.from(ARCHIVE.slice(0, 500)), Buffer.from(ARCHIVE.slice(500))]), ARCHIVE.length],
  ['a web stream with its size', () => Readable.toWeb(Readable.from([Buffer.from(ARCHIVE)])) as ReadableStream<Uint8Array>, ARCHIVE.length],
];

test.each(sources)('%s is PUT whole with its Content-Length to the URL as given, without the API key or client headers', async (_name, body, size) => {
  server = await startServer((_req, res) => json(res, 201, {}));
  await clientOf(server).uploadTemplateFiles(uploadUrl(server), body(), size, { headers: { 'X-Call': 'one' } });
  expect(server.requests).toHaveLength(1);
  const r = server.requests[0] as ReceivedRequest;
  expect([r.method, r.rawUrl]).toEqual(['PUT', `/templates/tpl/files/${'a'.repeat(64)}/upload?expires=99&signature=c2ln`]);
  expect(r.body).toBe(ARCHIVE);
  expect(r.headers['content-length']).toBe(String(ARCHIVE.length));
  expect(r.headers['transfer-encoding']).toBeUndefined();
  expect(r.headers['content-type']).toBe('application/octet-stream');
  expect(r.headers['x-api-key']).toBeUndefined();
  expect(r.headers['x-client']).toBeUndefined();
  expect(r.headers['x-call']).toBe('one');
});

test('a refused upload throws a ControlApiError with the status and the server message', async () => {
  server = await startServer((_req, res) => json(res, 403, { code: 403, message: 'the upload URL has expired; ask for another' }));
  const err = await clientOf(server).uploadTemplateFiles(uploadUrl(server), new Blob([ARCHIVE])).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ControlApiError);
  expect(err).toMatchObject({ kind: 'forbidden', status: 403, method: 'PUT', path: `/templates/tpl/files/${'a'.repeat(64)}/upload`, serverMessage: 'the upload URL has expired; ask for another' });
});

test('a file is sent again after a 503; a stream, which cannot be read twice, is not', async () => {
  server = await startServer((_req, res, i) => (i === 0 ? json(res, 503, { code: 503, message: 'busy' }) : json(res, 201, {})));
  await clientOf(server).uploadTemplateFiles(uploadUrl(server), join(dir, 'files.tar'));
  expect(server.requests.map((r) => r.body.length)).toEqual([ARCHIVE.length, ARCHIVE.length]);

  await server.close();
  server = await startServer((_req, res, i) => (i === 0 ? json(res, 503, { code: 503, message: 'busy' }) : json(res, 201, {})));
  const err = await clientOf(server).uploadTemplateFiles(uploadUrl(server), Readable.from([Buffer.from(ARCHIVE)]), ARCHIVE.length).catch((e: unknown) => e);
  expect(err).toMatchObject({ kind: 'unavailable', status: 503 });
  expect(server.requests).toHaveLength(1);
});

test('a stream without its size, or a size that is not the file\'s, is refused before anything is sent', async () => {
  server = await startServer((_req, res) => json(res, 201, {}));
  const client = clientOf(server);
  await expect(client.uploadTemplateFiles(uploadUrl(server), Readable.from([Buffer.from('x')]))).rejects.toThrow('uploadTemplateFiles needs the size of a stream, in bytes');
  await expect(client.uploadTemplateFiles(uploadUrl(server), join(dir, 'files.tar'), 3)).rejects.toThrow(`uploadTemplateFiles was given size 3, but the archive has ${ARCHIVE.length} bytes`);
  expect(server.requests).toHaveLength(0);
});
