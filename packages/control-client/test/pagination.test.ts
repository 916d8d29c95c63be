import { ControlClient, Paginator, type ListedSandbox } from '../src/index.js';
import { json, startServer, type LocalServer } from './local-server.js';

let server: LocalServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function listed(id: string): ListedSandbox {
  return {
    templateID: 'base',
    sandboxID: id,
    clientID: 'c',
    startedAt: '2024-01-01T00:00:00Z',
    endAt: '2024-01-01T00:05:00Z',
    cpuCount: 1,
    memoryMB: 256,
    diskSizeMB: 0,
    state: 'running',
    envdVersion: '0.6.4',
  };
}

// Three pages keyed by the cursor that asks for them; the last has no X-Next-Token.
const pages: Record<string, { ids: string[]; next?: string }> = {
  '': { ids: ['a', 'b'], next: 'tok-2' },
  'tok-2': { ids: ['c', 'd'], next: 'tok-3' },
  'tok-3': { ids: ['e'] },
};

async function pagedServer(): Promise<LocalServer> {
  return startServer((req, res) => {
    const page = pages[req.url.searchParams.get('nextToken') ?? ''];
    if (!page) return json(res, 400, { code: 400, message: 'unknown token' });
    json(res, 200, page.ids.map(listed), page.next ? { 'x-next-token': page.next } : {});
  });
}

describe('paginateSandboxes', () => {
  test('follows X-Next-Token across three pages, yields every item once, then stops', async () => {
    server = await pagedServer();
    const client = new ControlClient({ apiUrl: server.url });
    const ids: string[] = [];
    for await (const sandbox of client.paginateSandboxes({ state: ['running'], limit: 2 })) ids.push(sandbox.sandboxID);
    expect(ids).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(server.requests.map((r) => r.url.searchParams.get('nextToken'))).toEqual([null, 'tok-2', 'tok-3']);
    // The filters go with every page.
    for (const r of server.requests) {
      expect(r.url.searchParams.get('state')).toBe('running');
      expect(r.url.searchParams.get('limit')).toBe('2');
    }
  });

  test('pages() yields whole pages with the cursor of the next', async () => {
    server = await pagedServer();
    const client = new ControlClient({ apiUrl: server.url });
    const seen: [string[], string | undefined][] = [];
    for await (const page of client.paginateSandboxes().pages()) {
      seen.push([page.items.map((s) => s.sandboxID), page.nextToken]);
    }
    expect(seen).toEqual([
      [['a', 'b'], 'tok-2'],
      [['c', 'd'], 'tok-3'],
      [['e'], undefined],
    ]);
  });

  test('nextItems() walks by hand; hasNext turns false on the last page; one more call throws', async () => {
    server = await pagedServer();
    const client = new ControlClient({ apiUrl: server.url });
    const paginator = client.paginateSandboxes();
    expect(paginator.hasNext).toBe(true);
    expect((await paginator.nextItems()).map((s) => s.sandboxID)).toEqual(['a', 'b']);
    expect(paginator.nextToken).toBe('tok-2');
    await paginator.nextItems();
    expect((await paginator.nextItems()).map((s) => s.sandboxID)).toEqual(['e']);
    expect(paginator.hasNext).toBe(false);
    await expect(paginator.nextItems()).rejects.toThrow('No more pages');
    expect(server.requests).toHaveLength(3);
  });

  test('starting from a saved cursor skips the earlier pages', async () => {
    server = await pagedServer();
    const client = new ControlClient({ apiUrl: server.url });
    const ids: string[] = [];
    for await (const s of client.paginateSandboxes({ nextToken: 'tok-3' })) ids.push(s.sandboxID);
    expect(ids).toEqual(['e']);
    expect(server.requests).toHaveLength(1);
  });

  test('listSandboxes returns one page and its cursor', async () => {
    server = await pagedServer();
    const client = new ControlClient({ apiUrl: server.url });
    const page = await client.listSandboxes({ nextToken: 'tok-2' });
    expect(page.items.map((s) => s.sandboxID)).toEqual(['c', 'd']);
    expect(page.nextToken).toBe('tok-3');
  });

  test('an error on a later page surfaces from the iteration', async () => {
    server = await startServer((req, res) => {
      if (req.url.searchParams.get('nextToken')) return json(res, 401, { code: 401, message: 'key revoked' });
      json(res, 200, [listed('a')], { 'x-next-token': 'tok-2' });
    });
    const client = new ControlClient({ apiUrl: server.url });
    const ids: string[] = [];
    await expect(
      (async () => {
        for await (const s of client.paginateSandboxes()) ids.push(s.sandboxID);
      })(),
    ).rejects.toThrow('GET /v2/sandboxes failed with 401: key revoked');
    expect(ids).toEqual(['a']);
  });
});

describe('other paginated listings', () => {
  test('paginateTemplateBuilds follows X-Next-Token of GET /templates/{templateID}', async () => {
    const build = (id: string) => ({
      buildID: id,
      status: 'ready',
      createdAt: '2024-01-01T00:00:00Z',
      updatedAt: '2024-01-01T00:00:00Z',
      cpuCount: 1,
      memoryMB: 256,
    });
    const template = {
      templateID: 'tpl',
      public: false,
      aliases: [],
      names: ['tpl'],
      createdAt: '2024-01-01T00:00:00Z',
      updatedAt: '2024-01-01T00:00:00Z',
      lastSpawnedAt: null,
      spawnCount: 0,
    };
    server = await startServer((req, res) => {
      const token = req.url.searchParams.get('nextToken');
      if (token === null) json(res, 200, { ...template, builds: [build('b1'), build('b2')] }, { 'x-next-token': 'p2' });
      else if (token === 'p2') json(res, 200, { ...template, builds: [build('b3')] }, { 'x-next-token': 'p3' });
      else json(res, 200, { ...template, builds: [build('b4')] });
    });
    const client = new ControlClient({ apiUrl: server.url });
    const ids: string[] = [];
    for await (const b of client.paginateTemplateBuilds('tpl', { limit: 2 })) ids.push(b.buildID);
    expect(ids).toEqual(['b1', 'b2', 'b3', 'b4']);
    expect(server.requests.map((r) => r.url.pathname)).toEqual(Array(3).fill('/templates/tpl'));
    expect(server.requests.map((r) => r.url.searchParams.get('nextToken'))).toEqual([null, 'p2', 'p3']);
  });

  test('paginateSnapshots follows X-Next-Token of GET /snapshots and keeps its filter', async () => {
    server = await startServer((req, res) => {
      const token = req.url.searchParams.get('nextToken');
      if (token === null) json(res, 200, [{ snapshotID: 's1', names: [] }], { 'x-next-token': 'n2' });
      else if (token === 'n2') json(res, 200, [{ snapshotID: 's2', names: ['x'] }], { 'x-next-token': 'n3' });
      else json(res, 200, [{ snapshotID: 's3', names: [] }]);
    });
    const client = new ControlClient({ apiUrl: server.url });
    const ids: string[] = [];
    for await (const s of client.paginateSnapshots({ sandboxID: 'sbx1' })) ids.push(s.snapshotID);
    expect(ids).toEqual(['s1', 's2', 's3']);
    expect(server.requests.every((r) => r.url.searchParams.get('sandboxID') === 'sbx1')).toBe(true);
  });

  test('an empty X-Next-Token ends the listing', async () => {
    let calls = 0;
    const paginator = new Paginator<number>(async () => {
      calls += 1;
      return { items: [calls], nextToken: '' };
    });
    const items: number[] = [];
    for await (const n of paginator) items.push(n);
    expect(items).toEqual([1]);
  });
});
