import { ControlClient, encodeMetadataFilter } from '../src/index.js';
import { json, startServer, type LocalServer } from './local-server.js';

let server: LocalServer;
beforeAll(async () => {
  server = await startServer((_req, res) => json(res, 200, []));
});
afterAll(() => server.close());

// What a server does with the parameter: decode it (once, as any query
// parameter), parse the result as a query string, decode each key and value.
function serverDecode(rawUrl: string): Record<string, string> {
  const param = new URL(rawUrl, 'http://x').searchParams.get('metadata');
  if (param === null) throw new Error('no metadata parameter');
  const out: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(param)) out[decodeURIComponent(k)] = decodeURIComponent(v);
  return out;
}

describe('metadata filter of GET /v2/sandboxes', () => {
  test('is encoded byte for byte as the e2b SDK encodes it', async () => {
    const client = new ControlClient({ apiUrl: server.url });
    await client.listSandboxes({ metadata: { 'user id': 'a&b=c', x: 'é' } });
    const raw = server.requests.at(-1)?.rawUrl ?? '';
    expect(raw).toBe('/v2/sandboxes?metadata=user%252520id%3Da%252526b%25253Dc%26x%3D%2525C3%2525A9');
  });

  test('plain pairs arrive as a query string encoded once more', async () => {
    const client = new ControlClient({ apiUrl: server.url });
    await client.listSandboxes({ metadata: { user: 'alice', app: 'demo' } });
    expect(server.requests.at(-1)?.rawUrl).toBe('/v2/sandboxes?metadata=user%3Dalice%26app%3Ddemo');
  });

  test('a server decoding it the documented way gets the original pairs back', async () => {
    const metadata = { 'a+b': '1 2', '%25': '=&?', 'ключ': 'значение', empty: '', "q'uote": '"x"' };
    const client = new ControlClient({ apiUrl: server.url });
    await client.listSandboxes({ metadata });
    expect(serverDecode(server.requests.at(-1)?.rawUrl ?? '')).toEqual(metadata);
  });

  test('is left out when empty, and sits beside the other filters', async () => {
    const client = new ControlClient({ apiUrl: server.url });
    await client.listSandboxes({
      metadata: {},
      state: ['running', 'paused'],
      startedAfter: new Date(0),
      template: 'base',
      order: 'asc',
      limit: 5,
      nextToken: 'tok-page2',
    });
    expect(server.requests.at(-1)?.rawUrl).toBe(
      '/v2/sandboxes?state=running,paused&startedAfter=1970-01-01T00%3A00%3A00.000Z&template=base&order=asc&limit=5&nextToken=tok-page2',
    );
  });

  test('encodeMetadataFilter gives the inner query string', () => {
    expect(encodeMetadataFilter({ 'user id': 'a&b=c' })).toBe('user%2520id=a%2526b%253Dc');
  });
});
