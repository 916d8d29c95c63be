// Malformed requests get a 4xx with a JSON `{code, message}` body naming
// the problem, never a 500, and the server keeps serving.
import { request } from 'node:http';
import { ControlClient } from '@paddock/control-client';
import { rawExchange } from './raw-http.js';
import { API_KEY, testServer, type TestServer } from './harness.js';

let t: TestServer;
let sandboxId: string;
/** The server's one API key, which may not be deleted. */
let keyId: string;
beforeAll(async () => {
  t = await testServer();
  sandboxId = (await t.control.createSandbox({ templateID: 'base' })).sandboxID;
  keyId = (await t.control.listApiKeys())[0]!.id;
});
afterAll(() => t.teardown());

interface Case {
  name: string;
  method: string;
  path: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  status?: number;
  message?: RegExp;
}

const json = { 'content-type': 'application/json' };
const big = Buffer.alloc(2 * 1024 * 1024, 'a');

const cases = (): Case[] => [
  // bodies of the wrong type or shape
  { name: 'templateID a number', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":5}', headers: json, message: /templateID must be string/ },
  { name: 'templateID missing', method: 'POST', path: '/v2/sandboxes', body: '{}', headers: json, message: /required property 'templateID'/ },
  { name: 'templateID null', method: 'POST', path: '/sandboxes', body: '{"templateID":null}', headers: json },
  { name: 'timeout a string', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","timeout":"soon"}', headers: json, message: /timeout must be integer/ },
  { name: 'timeout negative', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","timeout":-1}', headers: json, message: /timeout must be >= 0/ },
  { name: 'timeout fractional', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","timeout":1.5}', headers: json },
  { name: 'timeout too long', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","timeout":99999999}', headers: json, message: /longer than the maximum/ },
  { name: 'metadata not an object', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","metadata":"x"}', headers: json, message: /metadata must be object/ },
  { name: 'metadata value a number', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","metadata":{"a":1}}', headers: json, message: /must be string/ },
  { name: 'envVars value an object', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","envVars":{"A":{}}}', headers: json },
  { name: 'secure a string', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","secure":"yes"}', headers: json },
  { name: 'autoPause a number', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","autoPause":1}', headers: json },
  { name: 'body an array', method: 'POST', path: '/v2/sandboxes', body: '[1,2]', headers: json },
  { name: 'body a string', method: 'POST', path: '/v2/sandboxes', body: '"base"', headers: json },
  { name: 'unknown template', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"does-not-exist"}', headers: json, status: 404 },
  { name: 'volume mounts', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]}', headers: json, message: /volumeMounts/ },
  { name: 'bad JSON', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":', headers: json },
  { name: 'JSON with trailing garbage', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base"} x', headers: json },
  { name: 'prototype pollution', method: 'POST', path: '/v2/sandboxes', body: '{"templateID":"base","__proto__":{"x":1}}', headers: json },
  { name: 'not JSON at all', method: 'POST', path: '/v2/sandboxes', body: 'templateID=base', headers: { 'content-type': 'application/x-www-form-urlencoded' }, status: 415 },
  { name: 'text body', method: 'POST', path: '/v2/sandboxes', body: 'base', headers: { 'content-type': 'text/plain' }, status: 415 },
  { name: 'huge body', method: 'POST', path: '/v2/sandboxes', body: big, headers: json, status: 413 },
  { name: 'required body missing', method: 'POST', path: '/v2/sandboxes', headers: json, message: /body is required/ },
  { name: 'connect timeout missing (v1)', method: 'POST', path: `/sandboxes/${'SBX'}/connect`, body: '{}', headers: json, message: /timeout/ },
  { name: 'connect timeout a string', method: 'POST', path: `/v2/sandboxes/${'SBX'}/connect`, body: '{"timeout":"x"}', headers: json },
  { name: 'timeout body missing', method: 'POST', path: `/sandboxes/${'SBX'}/timeout`, body: '{}', headers: json, message: /timeout/ },
  { name: 'timeout body wrong', method: 'POST', path: `/sandboxes/${'SBX'}/timeout`, body: '{"timeout":true}', headers: json },
  { name: 'pause memory a string', method: 'POST', path: `/sandboxes/${'SBX'}/pause`, body: '{"memory":"no"}', headers: json },
  { name: 'refresh duration too long', method: 'POST', path: `/sandboxes/${'SBX'}/refreshes`, body: '{"duration":99999}', headers: json, message: /duration must be <= 3600/ },
  { name: 'fork count zero', method: 'POST', path: `/sandboxes/${'SBX'}/fork`, body: '{"count":0}', headers: json, message: /count must be >= 1/ },
  { name: 'fork count huge', method: 'POST', path: `/sandboxes/${'SBX'}/fork`, body: '{"count":1000}', headers: json },
  { name: 'network allowOut not array', method: 'PUT', path: `/sandboxes/${'SBX'}/network`, body: '{"allowOut":"x"}', headers: json },
  { name: 'network bad CIDR', method: 'PUT', path: `/sandboxes/${'SBX'}/network`, body: '{"denyOut":["1.2.3.4/99"]}', headers: json, message: /denyOut\[0\]/ },
  { name: 'snapshot name bad', method: 'POST', path: `/sandboxes/${'SBX'}/snapshots`, body: '{"name":"a b:c"}', headers: json, message: /snapshot name/ },
  // query parameters
  { name: 'limit zero', method: 'GET', path: '/v2/sandboxes?limit=0', message: /limit must be >= 1/ },
  { name: 'limit too large', method: 'GET', path: '/v2/sandboxes?limit=1000', message: /limit must be <= 100/ },
  { name: 'limit not a number', method: 'GET', path: '/v2/sandboxes?limit=ten' },
  { name: 'unknown state', method: 'GET', path: '/v2/sandboxes?state=running,exploded', message: /state/ },
  { name: 'unknown order', method: 'GET', path: '/v2/sandboxes?order=sideways' },
  { name: 'startedAfter not a date', method: 'GET', path: '/v2/sandboxes?startedAfter=yesterday' },
  { name: 'forged nextToken', method: 'GET', path: '/v2/sandboxes?nextToken=%7B%7D', message: /nextToken/ },
  { name: 'malformed metadata filter', method: 'GET', path: '/v2/sandboxes?metadata=%25E0%25A4%25A', message: /metadata/ },
  { name: 'metrics start negative', method: 'GET', path: `/sandboxes/${'SBX'}/metrics?start=-5` },
  { name: 'metrics start not a number', method: 'GET', path: `/sandboxes/${'SBX'}/metrics?start=abc` },
  { name: 'sandbox_ids missing', method: 'GET', path: '/sandboxes/metrics', message: /sandbox_ids/ },
  { name: 'logs level unknown', method: 'GET', path: `/v2/sandboxes/${'SBX'}/logs?level=loud` },
  { name: 'template builds limit too large', method: 'GET', path: '/templates/base?limit=101' },
  // identifiers
  { name: 'unknown sandbox', method: 'GET', path: '/sandboxes/nosuchsandbox', status: 404 },
  { name: 'path traversal in id', method: 'GET', path: '/sandboxes/..%2F..%2Fetc%2Fpasswd', status: 404 },
  { name: 'dots as id', method: 'DELETE', path: '/sandboxes/..', status: 404 },
  { name: 'upper case id', method: 'POST', path: '/sandboxes/ABC/pause', body: '{}', headers: json, status: 404 },
  { name: 'very long id', method: 'GET', path: `/sandboxes/${'a'.repeat(400)}`, status: 404 },
  { name: 'id with NUL', method: 'GET', path: '/sandboxes/abc%00def', status: 404 },
  { name: 'unknown template detail', method: 'GET', path: '/templates/nope', status: 404 },
  { name: 'delete the base template', method: 'DELETE', path: '/templates/base', status: 409 },
  { name: 'unknown alias', method: 'GET', path: '/templates/aliases/nope', status: 404 },
  { name: 'tags for unknown template', method: 'POST', path: '/templates/tags', body: '{"target":"nope","tags":["v1"]}', headers: json, status: 404 },
  { name: 'tags missing', method: 'POST', path: '/templates/tags', body: '{"target":"base"}', headers: json, message: /tags/ },
  { name: 'bad tag', method: 'POST', path: '/templates/tags', body: '{"target":"base","tags":["no spaces"]}', headers: json, message: /tag 'no spaces'/ },
  { name: 'delete tags of unknown template', method: 'DELETE', path: '/templates/tags', body: '{"name":"nope","tags":["x"]}', headers: json, status: 404 },
  { name: 'unknown build', method: 'GET', path: '/templates/base/builds/nope/status', status: 404 },
  { name: 'template build body an array', method: 'POST', path: '/v3/templates', body: '[]', headers: json },
  { name: 'template build without a name', method: 'POST', path: '/v3/templates', body: '{}', headers: json, message: /name is required/ },
  { name: 'template build of a bad name', method: 'POST', path: '/v3/templates', body: '{"name":"No Spaces"}', headers: json, message: /name 'No Spaces' may use/ },
  { name: 'template build of a bad tag', method: 'POST', path: '/v3/templates', body: '{"name":"x:no spaces"}', headers: json, message: /tag 'no spaces'/ },
  { name: 'template build of the base name', method: 'POST', path: '/v3/templates', body: '{"name":"base"}', headers: json, status: 409, message: /not made by a build/ },
  { name: 'files hash not a sha256', method: 'GET', path: '/templates/base/files/xyz', message: /files hash 'xyz' is not a sha256/ },
  { name: 'files of an unknown template', method: 'GET', path: `/templates/nope/files/${'a'.repeat(64)}`, status: 404 },
  { name: 'build of an unknown build', method: 'POST', path: '/v2/templates/base/builds/nope', body: '{"fromTemplate":"base"}', headers: json, status: 404 },
  { name: 'upload without a signature', method: 'PUT', path: `/templates/base/files/${'a'.repeat(64)}/upload`, body: 'x', status: 403, message: /not signed/ },
  { name: 'upload with a wrong signature', method: 'PUT', path: `/templates/base/files/${'a'.repeat(64)}/upload?expires=${Date.now() + 60_000}&signature=AAAA`, body: 'x', status: 403, message: /does not match/ },
  { name: 'upload with an expired signature', method: 'PUT', path: `/templates/base/files/${'a'.repeat(64)}/upload?expires=1&signature=AAAA`, body: 'x', status: 403, message: /expired/ },
  // API keys
  { name: 'key name missing', method: 'POST', path: '/api-keys', body: '{}', headers: json, message: /required property 'name'/ },
  { name: 'key name empty', method: 'POST', path: '/api-keys', body: '{"name":""}', headers: json, message: /name must NOT have fewer than 1 characters/ },
  { name: 'key name a number', method: 'POST', path: '/api-keys', body: '{"name":5}', headers: json, message: /name must be string/ },
  { name: 'key rename without a body', method: 'PATCH', path: '/api-keys/some-id', headers: json, message: /body is required/ },
  { name: 'rename an unknown key', method: 'PATCH', path: '/api-keys/nosuch', body: '{"name":"x"}', headers: json, status: 404, message: /no API key has id 'nosuch'/ },
  { name: 'delete an unknown key', method: 'DELETE', path: '/api-keys/nosuch', status: 404, message: /no API key has id 'nosuch'/ },
  { name: 'delete the last key', method: 'DELETE', path: '/api-keys/KEY', status: 409, message: /is the last one/ },
  // routes and methods
  { name: 'unknown route', method: 'GET', path: '/nope', status: 404, message: /no route for GET \/nope/ },
  { name: 'wrong method', method: 'PATCH', path: '/sandboxes', status: 404 },
  { name: 'v3 sandboxes', method: 'POST', path: '/v3/sandboxes', body: '{}', headers: json, status: 404 },
];

function send(c: Case): Promise<{ status: number; body: string; type: string }> {
  const url = new URL(t.server.apiUrl + c.path.replace('SBX', sandboxId).replace('KEY', keyId));
  return new Promise((resolve, reject) => {
    const length = c.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(c.body)) };
    const req = request(url, { method: c.method, agent: false, headers: { 'x-api-key': API_KEY, ...length, ...c.headers } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: String(res.headers['content-type'] ?? '') }));
    });
    req.on('error', reject);
    req.end(c.body);
  });
}

test('at least 50 malformed requests each get a 4xx with a JSON {code, message} body', async () => {
  const all = cases();
  // Only client errors count here: what the server declines by design is tested apart.
  expect(all.filter((c) => (c.status ?? 400) < 400 || (c.status ?? 400) >= 500).map((c) => c.name)).toEqual([]);
  expect(all.length).toBeGreaterThanOrEqual(50);
  const failures: string[] = [];
  for (const c of all) {
    const res = await send(c).catch((err: Error) => ({ status: 0, body: `request failed: ${err.message}`, type: '' }));
    let body: { code?: unknown; message?: unknown } = {};
    try {
      body = JSON.parse(res.body) as typeof body;
    } catch {
      failures.push(`${c.name}: not JSON: ${res.body.slice(0, 100)}`);
      continue;
    }
    const expected = c.status ?? 400;
    const ok =
      res.status === expected &&
      res.type.startsWith('application/json') &&
      body.code === res.status &&
      typeof body.message === 'string' &&
      body.message.length > 0 &&
      (!c.message || c.message.test(body.message));
    if (!ok) failures.push(`${c.name}: ${res.status} ${res.body.slice(0, 200)} (expected ${expected}${c.message ? ` matching ${c.message}` : ''})`);
  }
  expect(failures).toEqual([]);
});

test('the proxy answers what it cannot route with a 4xx and a JSON body naming the problem', async () => {
  const port = Number(new URL(t.server.proxyUrl).port);
  const ask = async (bytes: string) => (await rawExchange(port, bytes, (text) => text.includes('"}'))).text;
  const bodyOf = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { code: number; message: string };
  const target = await ask('GET http://[x HTTP/1.1\r\nHost: x\r\n\r\n');
  expect(bodyOf(target)).toEqual({ code: 400, message: "request target 'http://[x' is not a valid URL" });
  const port0 = await ask(`GET /health HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: ${sandboxId}\r\nE2b-Sandbox-Port: 0\r\n\r\n`);
  expect(bodyOf(port0)).toEqual({ code: 400, message: "sandbox port '0' is not a TCP port" });
  const noHost = await ask(`GET /health HTTP/1.1\r\nE2b-Sandbox-Id: ${sandboxId}\r\n\r\n`);
  expect(bodyOf(noHost)).toEqual({ code: 400, message: 'an HTTP/1.1 request must have a Host header' });
  const smuggle = await ask('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n');
  // In the words of the path the switch picked; test/relay.test.ts holds each path to its own.
  expect(bodyOf(smuggle).code).toBe(400);
  expect(bodyOf(smuggle).message).toMatch(/^(the request has both content-length and transfer-encoding|the request is not valid HTTP\/1\.1: Transfer-Encoding can't be present with Content-Length)$/);
});

test('the Dockerfile build route of the old API answers 501 with a JSON body naming the build API, by design', async () => {
  const res = await send({ name: 'template build', method: 'POST', path: '/templates', body: '{"dockerfile":"FROM x"}', headers: json });
  expect(res.type).toMatch(/^application\/json/);
  expect([res.status, JSON.parse(res.body)]).toEqual([501, { code: 501, message: expect.stringMatching(/v2 build API/) }]);
});

test('API keys: one created opens the server and is listed masked; renamed; once deleted it opens nothing', async () => {
  const created = await t.control.createApiKey({ name: 'second' });
  expect(created).toEqual({
    id: expect.any(String),
    key: expect.stringMatching(/^e2b_[0-9a-f]{40}$/),
    name: 'second',
    mask: { prefix: 'e2b_', valueLength: 40, maskedValuePrefix: created.key.slice(4, 8), maskedValueSuffix: created.key.slice(-4) },
    createdAt: expect.any(String),
    createdBy: null,
    lastUsed: null,
  });
  const withNew = new ControlClient({ apiUrl: t.server.apiUrl, apiKey: created.key, retries: { maxRetries: 0 } });
  const listed = await withNew.listApiKeys();
  expect(listed.map((k) => k.name)).toEqual(['default', 'second']);
  expect(JSON.stringify(listed)).not.toContain(created.key);
  expect(listed[1]).toMatchObject({ id: created.id, mask: created.mask, createdBy: null });
  await withNew.renameApiKey(created.id, { name: 'renamed' });
  expect((await t.control.listApiKeys()).map((k) => k.name)).toEqual(['default', 'renamed']);
  // A key may delete itself; what it asks afterwards is refused.
  await withNew.deleteApiKey(created.id);
  await expect(withNew.listApiKeys()).rejects.toMatchObject({ status: 401, serverMessage: 'invalid API key' });
  expect((await t.control.listApiKeys()).map((k) => k.id)).toEqual([keyId]);
});

test('the server is still up and the sandbox still usable', async () => {
  expect((await fetch(`${t.server.apiUrl}/health`)).status).toBe(204);
  expect((await t.control.getSandbox(sandboxId)).state).toBe('running');
});
