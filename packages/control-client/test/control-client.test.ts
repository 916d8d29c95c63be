import { ControlApiError, ControlClient } from '../src/index.js';
import { json, startServer, type LocalServer, type ReceivedRequest } from './local-server.js';

const sandbox = {
  templateID: 'base',
  sandboxID: 'sbx1',
  clientID: 'c',
  envdVersion: '0.6.4',
  envdAccessToken: 'tok',
  domain: 'paddock.test',
};

let server: LocalServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('what every call carries', () => {
  test('the API key as X-API-Key, the client headers and the call headers', async () => {
    server = await startServer((_req, res) => json(res, 200, []));
    const client = new ControlClient({ apiUrl: server.url, apiKey: 'pk_123', headers: { 'X-Client': 'tests' } });
    await client.listTemplates({}, { headers: { 'X-Call': 'one' } });
    const { headers } = server.requests[0] as ReceivedRequest;
    expect(headers['x-api-key']).toBe('pk_123');
    expect(headers['x-client']).toBe('tests');
    expect(headers['x-call']).toBe('one');
  });

  test('no X-API-Key without an API key', async () => {
    server = await startServer((_req, res) => res.writeHead(204).end());
    const client = new ControlClient({ apiUrl: server.url });
    await expect(client.health()).resolves.toBe(true);
    expect(server.requests[0]?.headers['x-api-key']).toBeUndefined();
  });

  test('a path prefix in apiUrl is kept', async () => {
    server = await startServer((_req, res) => json(res, 200, []));
    const client = new ControlClient({ apiUrl: `${server.url}/control/` });
    await client.listSnapshots();
    expect(server.requests[0]?.url.pathname).toBe('/control/snapshots');
  });

  test('requestTimeoutMs bounds a call whose answer never comes', async () => {
    server = await startServer(() => undefined);
    const client = new ControlClient({ apiUrl: server.url, requestTimeoutMs: 150 });
    const err = await client.getSandbox('sbx1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlApiError);
    expect((err as ControlApiError).kind).toBe('timeout');
    expect((err as ControlApiError).message).toBe('GET /sandboxes/sbx1 timed out');
  });

  test('the per-call requestTimeoutMs also bounds a body that stalls', async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[{"templateID":');
    });
    const client = new ControlClient({ apiUrl: server.url });
    const err = await client.listTemplates({}, { requestTimeoutMs: 150 }).catch((e: unknown) => e);
    expect((err as ControlApiError).kind).toBe('timeout');
  });
});

describe('typed operations', () => {
  test('connectSandbox tells a running sandbox (200) from a resumed one (201)', async () => {
    server = await startServer((req, res) => json(res, req.url.pathname.includes('paused') ? 201 : 200, sandbox));
    const client = new ControlClient({ apiUrl: server.url });
    await expect(client.connectSandbox('running-1', { timeout: 60 })).resolves.toEqual({ sandbox, resumed: false });
    await expect(client.connectSandbox('paused-1', { timeout: 60 })).resolves.toEqual({ sandbox, resumed: true });
    expect(server.requests.map((r) => [r.method, r.url.pathname, r.body])).toEqual([
      ['POST', '/v2/sandboxes/running-1/connect', '{"timeout":60}'],
      ['POST', '/v2/sandboxes/paused-1/connect', '{"timeout":60}'],
    ]);
  });

  // Each operation: the call, and the method, path (with query) and JSON body the server must see.
  const operations: [string, (c: ControlClient) => Promise<unknown>, string, string, unknown][] = [
    ['createSandbox', (c) => c.createSandbox({ templateID: 'base', timeout: 30 }), 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 30 }],
    ['getSandbox', (c) => c.getSandbox('s/1'), 'GET', '/sandboxes/s%2F1', undefined],
    ['killSandbox', (c) => c.killSandbox('s1'), 'DELETE', '/sandboxes/s1', undefined],
    ['pauseSandbox', (c) => c.pauseSandbox('s1'), 'POST', '/sandboxes/s1/pause', {}],
    ['resumeSandbox', (c) => c.resumeSandbox('s1', { timeout: 10 }), 'POST', '/sandboxes/s1/resume', { timeout: 10 }],
    ['setTimeout', (c) => c.setTimeout('s1', { timeout: 5 }), 'POST', '/sandboxes/s1/timeout', { timeout: 5 }],
    ['refresh', (c) => c.refresh('s1', { duration: 9 }), 'POST', '/sandboxes/s1/refreshes', { duration: 9 }],
    ['updateNetwork', (c) => c.updateNetwork('s1', { denyOut: ['0.0.0.0/0'] }), 'PUT', '/sandboxes/s1/network', { denyOut: ['0.0.0.0/0'] }],
    ['getSandboxMetrics', (c) => c.getSandboxMetrics('s1', { start: 10, end: 20 }), 'GET', '/sandboxes/s1/metrics?start=10&end=20', undefined],
    ['getSandboxLogs', (c) => c.getSandboxLogs('s1', { limit: 5, direction: 'backward' }), 'GET', '/v2/sandboxes/s1/logs?limit=5&direction=backward', undefined],
    ['forkSandbox', (c) => c.forkSandbox('s1', { count: 2 }), 'POST', '/sandboxes/s1/fork', { count: 2 }],
    ['createSnapshot', (c) => c.createSnapshot('s1', { name: 'snap' }), 'POST', '/sandboxes/s1/snapshots', { name: 'snap' }],
    ['listSnapshots', (c) => c.listSnapshots({ name: 'snap', limit: 3 }), 'GET', '/snapshots?name=snap&limit=3', undefined],
    ['listTemplates', (c) => c.listTemplates({ teamID: 't1' }), 'GET', '/templates?teamID=t1', undefined],
    ['getTemplate', (c) => c.getTemplate('tpl', { limit: 1 }), 'GET', '/templates/tpl?limit=1', undefined],
    ['deleteTemplate', (c) => c.deleteTemplate('tpl'), 'DELETE', '/templates/tpl', undefined],
    ['getTemplateByAlias', (c) => c.getTemplateByAlias('my-alias'), 'GET', '/templates/aliases/my-alias', undefined],
    ['assignTemplateTags', (c) => c.assignTemplateTags({ target: 'tpl', tags: ['v1'] }), 'POST', '/templates/tags', { target: 'tpl', tags: ['v1'] }],
    ['deleteTemplateTags', (c) => c.deleteTemplateTags({ name: 'tpl', tags: ['v1'] }), 'DELETE', '/templates/tags', { name: 'tpl', tags: ['v1'] }],
    ['listTemplateTags', (c) => c.listTemplateTags('tpl'), 'GET', '/templates/tpl/tags', undefined],
    ['requestTemplateBuild', (c) => c.requestTemplateBuild({ name: 'app:v1', tags: ['x'], cpuCount: 2, memoryMB: 1024 }), 'POST', '/v3/templates', { name: 'app:v1', tags: ['x'], cpuCount: 2, memoryMB: 1024 }],
    ['templateFileUpload', (c) => c.templateFileUpload('tpl', 'ab12'), 'GET', '/templates/tpl/files/ab12', undefined],
    [
      'startTemplateBuild',
      (c) => c.startTemplateBuild('tpl', 'b1', { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true', 'root'] }], startCmd: 'serve', force: true }),
      'POST',
      '/v2/templates/tpl/builds/b1',
      { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true', 'root'] }], startCmd: 'serve', force: true },
    ],
    ['rebuildTemplate', (c) => c.rebuildTemplate('base'), 'POST', '/templates/base/rebuild', undefined],
    ['getTemplateBuildStatus', (c) => c.getTemplateBuildStatus('tpl', 'b1', { logsOffset: 3, limit: 10, level: 'warn' }), 'GET', '/templates/tpl/builds/b1/status?logsOffset=3&limit=10&level=warn', undefined],
    ['getTemplateBuildLogs', (c) => c.getTemplateBuildLogs('tpl', 'b1', { cursor: 1000, direction: 'backward', source: 'persistent' }), 'GET', '/templates/tpl/builds/b1/logs?cursor=1000&direction=backward&source=persistent', undefined],
    ['listApiKeys', (c) => c.listApiKeys(), 'GET', '/api-keys', undefined],
    ['createApiKey', (c) => c.createApiKey({ name: 'ci' }), 'POST', '/api-keys', { name: 'ci' }],
    ['renameApiKey', (c) => c.renameApiKey('k/1', { name: 'ci' }), 'PATCH', '/api-keys/k%2F1', { name: 'ci' }],
    ['deleteApiKey', (c) => c.deleteApiKey('k1'), 'DELETE', '/api-keys/k1', undefined],
    ['listTeams', (c) => c.listTeams(), 'GET', '/admin/teams', undefined],
    ['createTeam', (c) => c.createTeam({ name: 'a', limits: { maxSandboxes: 2 } }), 'POST', '/admin/teams', { name: 'a', limits: { maxSandboxes: 2 } }],
    ['getTeam', (c) => c.getTeam('t/1'), 'GET', '/admin/teams/t%2F1', undefined],
    ['deleteTeam', (c) => c.deleteTeam('t1'), 'DELETE', '/admin/teams/t1', undefined],
    ['setTeamLimits', (c) => c.setTeamLimits('t1', { maxMemoryMB: null }), 'PATCH', '/admin/teams/t1/limits', { maxMemoryMB: null }],
    ['listTeamApiKeys', (c) => c.listTeamApiKeys('t1'), 'GET', '/admin/teams/t1/api-keys', undefined],
    ['createTeamApiKey', (c) => c.createTeamApiKey('t1', { name: 'ci' }), 'POST', '/admin/teams/t1/api-keys', { name: 'ci' }],
    ['deleteTeamApiKey', (c) => c.deleteTeamApiKey('t1', 'k1'), 'DELETE', '/admin/teams/t1/api-keys/k1', undefined],
    ['health', (c) => c.health(), 'GET', '/health', undefined],
  ];

  test.each(operations)('%s sends the operation of the spec', async (_name, call, method, pathAndQuery, body) => {
    // Answers every call with something its method accepts: 204 for void ones, a JSON value otherwise.
    server = await startServer((req, res) => {
      if (req.method === 'DELETE' || /\/(pause|timeout|refreshes|network)$/.test(req.url.pathname) || req.url.pathname === '/health') {
        res.writeHead(204).end();
      } else if (/^\/templates\/tpl$/.test(req.url.pathname)) {
        json(res, 200, { templateID: 'tpl', builds: [] });
      } else {
        json(res, 200, req.method === 'GET' && !req.url.pathname.includes('aliases') ? [] : { ok: true });
      }
    });
    const client = new ControlClient({ apiUrl: server.url, apiKey: 'k' });
    await call(client);
    const r = server.requests[0] as ReceivedRequest;
    expect(r.method).toBe(method);
    expect(r.rawUrl).toBe(pathAndQuery);
    if (body === undefined) expect(r.body).toBe('');
    else {
      expect(JSON.parse(r.body)).toEqual(body);
      expect(r.headers['content-type']).toBe('application/json');
    }
  });
});
