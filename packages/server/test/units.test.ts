// The server's pure pieces: egress validation, list queries and pages, the
// conversion of errors, the spec loader, the data directory's lock.
import { RuntimeError } from '@paddock/runtime';
import { validateEgress, validateMaskRequestHost } from '../src/network.js';
import { ApiError, toApiError } from '../src/errors.js';
import { parseMetadataFilter } from '../src/metadata-filter.js';
import { decodePageToken, encodePageToken, readPage, windowOf } from '../src/pagination.js';
import { loadOperations } from '../src/openapi.js';
import { CONFIG_KEYS, configTable, explainServerConfig, resolveServerConfig } from '../src/config.js';
import { newApiKey, StoreError } from '../src/store/repositories.js';
import { lockHome } from '../src/home-lock.js';
import { withVars } from '../src/builds/builder.js';
import { copySource } from '../src/builds/steps.js';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

test('allowOut takes CIDRs, IPs and domains with a leading wildcard; denyOut only CIDRs and IPs; each at most the configured number', () => {
  const max = 16;
  expect(validateEgress('allowOut', ['10.0.0.0/8', '::1', '2001:db8::/32', 'example.com', '*.example.com', ' pypi.org '], max)).toEqual([
    '10.0.0.0/8',
    '::1',
    '2001:db8::/32',
    'example.com',
    '*.example.com',
    'pypi.org',
  ]);
  for (const bad of ['*', 'exa mple.com', '10.0.0.0/40', '1.2.3', 'a..b', '-x.com', '*.*.com', 'a.*.com', 'x'.repeat(64) + '.com', '', '2001:db8::/129']) {
    expect(() => validateEgress('allowOut', [bad], max)).toThrow(`allowOut[0] '${bad}'`);
  }
  expect(() => validateEgress('denyOut', ['example.com'], max)).toThrow('domains are allowed only in allowOut');
  expect(validateEgress('denyOut', ['0.0.0.0/0'], max)).toEqual(['0.0.0.0/0']);
  expect(validateEgress('allowOut', undefined, max)).toBeUndefined();
  expect(() => validateEgress('denyOut', Array.from({ length: 17 }, (_, i) => `10.0.${i}.0/24`), max)).toThrow('denyOut has 17 entries; at most 16 are allowed');
});

test('maskRequestHost is a host, with ${PORT} for the port, and nothing that could end a header', () => {
  for (const good of ['${PORT}-app.internal.example', 'app.internal:8080', '[::1]:${PORT}']) expect(validateMaskRequestHost(good)).toBe(good);
  for (const bad of ['', 'a b', 'x\r\nx-evil: 1', 'a/b', 'x'.repeat(256), 42]) expect(() => validateMaskRequestHost(bad)).toThrow('is not a host');
});

test('the metadata filter is a query string of URL-encoded keys and values', () => {
  // What the e2b SDK sends after the HTTP layer decoded the parameter once.
  const sdk = new URLSearchParams({ [encodeURIComponent('user id')]: encodeURIComponent('a&b=c'), x: encodeURIComponent('é') }).toString();
  expect(parseMetadataFilter(sdk)).toEqual({ 'user id': 'a&b=c', x: 'é' });
  expect(parseMetadataFilter('a=1&b=2')).toEqual({ a: '1', b: '2' });
  expect(parseMetadataFilter('')).toBeUndefined();
  expect(() => parseMetadataFilter('a=%E0%A4%A')).toThrow('is not a URL-encoded query string');
});

test('page tokens round trip, read as before, and forged ones are refused naming nextToken', () => {
  const p = { key: 1700000000000, id: 'abc' };
  expect(decodePageToken(encodePageToken(p))).toEqual(p);
  // The form the sandbox list issued before: still read.
  expect(decodePageToken(Buffer.from('[1700000000000,"abc"]').toString('base64url'))).toEqual(p);
  expect(decodePageToken(undefined)).toBeUndefined();
  expect(decodePageToken('')).toBeUndefined();
  for (const forged of ['nonsense', Buffer.from('{}').toString('base64url'), Buffer.from('["1","a"]').toString('base64url')]) {
    expect(() => decodePageToken(forged)).toThrow(`nextToken '${forged}' is not a cursor this server issued`);
  }
});

test('readPage: windows one longer than the page, a token only when more follow, every item once', async () => {
  const items = Array.from({ length: 7 }, (_, i) => ({ key: 1000 + Math.floor(i / 2), id: `i${i}` }));
  const windows: Array<{ limit: number; after?: unknown }> = [];
  const read = (w: { limit: number; after?: { key: number; id: string } }) => {
    windows.push(w);
    return windowOf(items, w, (x) => x, 'asc');
  };
  const seen: string[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const page = await readPage({ limit: 3, nextToken: token }, read, (x) => x);
    seen.push(...page.items.map((x) => x.id));
    token = page.nextToken;
    pages++;
  } while (token && pages < 10);
  expect(seen).toEqual(items.map((x) => x.id));
  expect(pages).toBe(3);
  expect(windows.map((w) => w.limit)).toEqual([4, 4, 4]);
  expect(windows[0]).toEqual({ limit: 4 });
  // A list that ends exactly at a page's end has no next token.
  expect((await readPage({ limit: 7 }, read, (x) => x)).nextToken).toBeUndefined();
  // No limit: the spec's default of 100.
  await readPage({}, read, (x) => x);
  expect(windows.at(-1)?.limit).toBe(101);
  const desc = [...items].reverse();
  expect(windowOf(desc, { limit: 2, after: { key: 1002, id: 'i4' } }, (x) => x, 'desc').map((x) => x.id)).toEqual(['i3', 'i2']);
  expect(windowOf(items, { limit: 2, after: { key: 9999, id: 'z' } }, (x) => x, 'asc')).toEqual([]);
});

test("one conversion of failures to API errors: ours, the store's, the runtime's, fastify's; the rest is a 500", () => {
  const pairs = (e: ApiError) => [e.status, e.message];
  expect(pairs(toApiError(new ApiError(418, 'teapot')))).toEqual([418, 'teapot']);
  expect(pairs(toApiError(new StoreError('not_found', "sandbox 'x' not found")))).toEqual([404, "sandbox 'x' not found"]);
  expect(pairs(toApiError(new StoreError('conflict', "sandbox 'x' is paused, not running")))).toEqual([409, "sandbox 'x' is paused, not running"]);
  expect(pairs(toApiError(new RuntimeError('invalid', 'bad port')))).toEqual([400, 'bad port']);
  expect(pairs(toApiError(new RuntimeError('unavailable', 'no capacity')))).toEqual([503, 'no capacity']);
  const validation = Object.assign(new Error('body/templateID must be string'), { validation: [{}], statusCode: 400 });
  expect(pairs(toApiError(validation))).toEqual([400, 'body/templateID must be string']);
  const tooLarge = Object.assign(new Error('Request body is too large'), { statusCode: 413 });
  expect(pairs(toApiError(tooLarge))).toEqual([413, 'Request body is too large']);
  // A 5xx code on a foreign error is not trusted to be the client's doing.
  expect(pairs(toApiError(Object.assign(new Error('db closed'), { statusCode: 503 })))).toEqual([500, 'internal error: db closed']);
  expect(pairs(toApiError('thrown string'))).toEqual([500, 'internal error: thrown string']);
});

test('every operation of the spec becomes a route; `state` is a comma list; health is public; /metrics and /admin take the admin credential, /metrics also as a bearer token', () => {
  const ops = loadOperations();
  expect(ops.length).toBe(55);
  expect(new Set(ops.map((o) => o.operationId)).size).toBe(55);
  const list = ops.find((o) => o.operationId === 'getV2Sandboxes')!;
  expect(list).toMatchObject({ method: 'GET', routePath: '/v2/sandboxes', commaArrays: ['state'] });
  expect(list.schema.querystring?.properties).toHaveProperty('limit');
  const connect = ops.find((o) => o.operationId === 'postSandboxesSandboxIDConnect')!;
  expect(connect.routePath).toBe('/sandboxes/:sandboxID/connect');
  expect(connect.schema.body).toMatchObject({ type: 'object', required: ['timeout'] });
  expect(connect.bodyRequired).toBe(true);
  expect(ops.filter((o) => o.public).map((o) => o.operationId)).toEqual(['getHealth', 'getHealthLive', 'getHealthReady', 'postDashboardSession']);
  expect(ops.filter((o) => o.bearerKey).map((o) => o.operationId)).toEqual(['getMetrics']);
  expect(ops.filter((o) => o.path.startsWith('/api-keys')).map((o) => `${o.method} ${o.routePath}`)).toEqual([
    'GET /api-keys',
    'POST /api-keys',
    'PATCH /api-keys/:apiKeyID',
    'DELETE /api-keys/:apiKeyID',
  ]);
  expect(ops.filter((o) => o.admin).map((o) => `${o.method} ${o.routePath}`)).toEqual([
    'GET /metrics',
    'GET /admin/teams',
    'POST /admin/teams',
    'GET /admin/teams/:teamID',
    'DELETE /admin/teams/:teamID',
    'PATCH /admin/teams/:teamID/limits',
    'GET /admin/teams/:teamID/api-keys',
    'POST /admin/teams/:teamID/api-keys',
    'DELETE /admin/teams/:teamID/api-keys/:apiKeyID',
  ]);
  expect(JSON.stringify(ops)).not.toContain('$ref');
});

test('configuration: options over PADDOCK_* variables over defaults', () => {
  const saved = { ...process.env };
  try {
    delete process.env.PADDOCK_API_HOST;
    delete process.env.PADDOCK_PROXY_HOST;
    process.env.PADDOCK_API_PORT = '4000';
    process.env.PADDOCK_HOME = '/srv/paddock';
    const c = resolveServerConfig({ proxyPort: 4001 });
    expect(c).toMatchObject({
      apiPort: 4000,
      proxyPort: 4001,
      home: '/srv/paddock',
      domain: 'localhost:4001',
      apiHost: '127.0.0.1',
      proxyHost: '127.0.0.1',
      defaultTimeoutSeconds: 300,
    });
    // Either address opens up only when asked to.
    process.env.PADDOCK_PROXY_HOST = '0.0.0.0';
    expect(resolveServerConfig()).toMatchObject({ apiHost: '127.0.0.1', proxyHost: '0.0.0.0' });
    expect(resolveServerConfig({ proxyHost: '::1' }).proxyHost).toBe('::1');
    delete process.env.PADDOCK_PROXY_HOST;
    process.env.PADDOCK_API_PORT = 'many';
    expect(() => resolveServerConfig()).toThrow("PADDOCK_API_PORT='many' is not a non-negative number");
    delete process.env.PADDOCK_API_PORT;
    expect(() => resolveServerConfig({ defaultTimeoutSeconds: 100, maxTimeoutSeconds: 10 })).toThrow('longer than the maximum');
  } finally {
    process.env = saved;
  }
});

test('configuration: the log level and file, by option or PADDOCK_LOG_LEVEL / PADDOCK_LOG_FILE; an unknown level is refused by name', () => {
  const saved = { ...process.env };
  try {
    delete process.env.PADDOCK_LOG_LEVEL;
    delete process.env.PADDOCK_LOG_FILE;
    expect(resolveServerConfig()).toMatchObject({ logLevel: 'info', logFile: undefined });
    process.env.PADDOCK_LOG_LEVEL = 'DEBUG';
    process.env.PADDOCK_LOG_FILE = 'paddock.log';
    expect(resolveServerConfig()).toMatchObject({ logLevel: 'debug', logFile: resolve('paddock.log') });
    expect(resolveServerConfig({ logLevel: 'warn' }).logLevel).toBe('warn');
    process.env.PADDOCK_LOG_LEVEL = 'loud';
    expect(() => resolveServerConfig()).toThrow("logLevel (PADDOCK_LOG_LEVEL) 'loud' is not one of fatal, error, warn, info, debug, trace, silent");
  } finally {
    process.env = saved;
  }
});

test('configuration file: YAML keys spelled as the flags, under variables and options; bad values and unknown keys refused by name', () => {
  const saved = { ...process.env };
  const dir = mkdtempSync(join(tmpdir(), 'paddock-config-'));
  try {
    for (const k of Object.keys(process.env)) if (k.startsWith('PADDOCK_')) delete process.env[k];
    const file = join(dir, 'paddock.yaml');
    writeFileSync(file, ['api-port: 4100', 'proxy-port: 4101', 'warm-pool: 0', 'dns: [192.0.2.53, 192.0.2.54]', 'cors-origins: https://a.example, https://b.example', 'network: off', 'log-level: warn', 'home: data'].join('\n'));
    process.env.PADDOCK_CONFIG = file;
    process.env.PADDOCK_PROXY_PORT = '4201';
    const { config, sources } = explainServerConfig({ warmPoolSize: 3 });
    expect(config).toMatchObject({
      configFile: file,
      apiPort: 4100,
      proxyPort: 4201,
      domain: 'localhost:4201',
      warmPoolSize: 3,
      dns: ['192.0.2.53', '192.0.2.54'],
      corsOrigins: ['https://a.example', 'https://b.example'],
      network: false,
      logLevel: 'warn',
      home: resolve('data'),
      apiHost: '127.0.0.1',
    });
    expect(sources).toMatchObject({ apiPort: 'file', proxyPort: 'env', warmPoolSize: 'option', apiHost: 'default', domain: 'default', configFile: 'env' });
    // An option names the file over the variable.
    const other = join(dir, 'other.yaml');
    writeFileSync(other, 'api-port: 4300\n');
    expect(resolveServerConfig({ configFile: other }).apiPort).toBe(4300);

    writeFileSync(file, 'api-port: many\n');
    expect(() => resolveServerConfig()).toThrow(`api-port: "many" in ${file} is not a non-negative number`);
    writeFileSync(file, 'max-connections-per-address: 0\n');
    expect(() => resolveServerConfig()).toThrow(`maxConnectionsPerAddress (max-connections-per-address in ${file}) is 0; it must be at least 1`);
    writeFileSync(file, 'apiPort: 1\n');
    expect(() => resolveServerConfig()).toThrow(`the configuration file ${file} has an unknown key 'apiPort'; the keys are home, api-host, api-port`);
    writeFileSync(file, 'dns: {a: 1}\n');
    expect(() => resolveServerConfig()).toThrow(`dns: {"a":1} in ${file} is not a list of strings`);
    writeFileSync(file, '- a\n- b\n');
    expect(() => resolveServerConfig()).toThrow(`the configuration file ${file} must be a mapping of keys to values`);
    writeFileSync(file, 'api-port: [\n');
    expect(() => resolveServerConfig()).toThrow(`the configuration file ${file} is not valid YAML`);
    process.env.PADDOCK_CONFIG = join(dir, 'missing.yaml');
    expect(() => resolveServerConfig()).toThrow(`the configuration file ${join(dir, 'missing.yaml')} cannot be read`);
  } finally {
    process.env = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README's configuration table is every setting's row", () => {
  const readme = readFileSync(join(import.meta.dirname, '../../../README.md'), 'utf8');
  expect(readme).toContain(configTable());
  expect(CONFIG_KEYS.map((k) => k.key).sort()).toEqual(Object.keys(resolveServerConfig()).filter((k) => k !== 'configFile').sort());
});

test("configuration: the proxy's fast path, on by default, switched by option or PADDOCK_PROXY_FAST_PATH", () => {
  const saved = { ...process.env };
  try {
    delete process.env.PADDOCK_PROXY_FAST_PATH;
    expect(resolveServerConfig().proxyFastPath).toBe(true);
    process.env.PADDOCK_PROXY_FAST_PATH = 'off';
    expect(resolveServerConfig().proxyFastPath).toBe(false);
    expect(resolveServerConfig({ proxyFastPath: true }).proxyFastPath).toBe(true);
    process.env.PADDOCK_PROXY_FAST_PATH = '1';
    expect(resolveServerConfig().proxyFastPath).toBe(true);
    process.env.PADDOCK_PROXY_FAST_PATH = 'fast';
    expect(() => resolveServerConfig()).toThrow("PADDOCK_PROXY_FAST_PATH='fast' is neither on (1, true, on) nor off (0, false, off)");
  } finally {
    process.env = saved;
  }
});

test('configuration: limits on client connections, by option, PADDOCK_* variable or default, and each at least 1', () => {
  const saved = { ...process.env };
  try {
    for (const name of ['HEADER_TIMEOUT_MS', 'BODY_TIMEOUT_MS', 'IDLE_TIMEOUT_MS', 'MAX_CONNECTIONS_PER_ADDRESS']) delete process.env[`PADDOCK_${name}`];
    expect(resolveServerConfig()).toMatchObject({ headerTimeoutMs: 20_000, bodyTimeoutMs: 30_000, idleTimeoutMs: 65_000, maxConnectionsPerAddress: 512 });
    process.env.PADDOCK_HEADER_TIMEOUT_MS = '5000';
    process.env.PADDOCK_BODY_TIMEOUT_MS = '6000';
    process.env.PADDOCK_IDLE_TIMEOUT_MS = '7000';
    process.env.PADDOCK_MAX_CONNECTIONS_PER_ADDRESS = '64';
    expect(resolveServerConfig({ idleTimeoutMs: 8000 })).toMatchObject({ headerTimeoutMs: 5000, bodyTimeoutMs: 6000, idleTimeoutMs: 8000, maxConnectionsPerAddress: 64 });
    process.env.PADDOCK_MAX_CONNECTIONS_PER_ADDRESS = '0';
    expect(() => resolveServerConfig()).toThrow('maxConnectionsPerAddress (PADDOCK_MAX_CONNECTIONS_PER_ADDRESS) is 0; it must be at least 1');
    expect(() => resolveServerConfig({ maxConnectionsPerAddress: 1, bodyTimeoutMs: 0 })).toThrow('bodyTimeoutMs (option) is 0; it must be at least 1');
  } finally {
    process.env = saved;
  }
});

test('new API keys have the form every SDK accepts', () => {
  const k = newApiKey();
  expect(k).toMatch(/^e2b_[0-9a-f]{40}$/);
  expect(newApiKey()).not.toBe(k);
});

test("the data directory's lock: refused while its holder lives, taken over from a dead one or a broken file", () => {
  const home = mkdtempSync(join(tmpdir(), 'paddock-lock-'));
  const file = join(home, 'server.pid');
  try {
    // A live holder that is not this process.
    const holder = process.ppid;
    writeFileSync(file, String(holder));
    expect(() => lockHome(home)).toThrow(`another Paddock process (pid ${holder}) is using '${home}': stop it first`);
    expect(readFileSync(file, 'utf8')).toBe(String(holder));

    // A process that has exited, then a file that names no process.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    for (const stale of [dead, 'not a pid', '']) {
      writeFileSync(file, stale);
      const release = lockHome(home);
      expect(readFileSync(file, 'utf8')).toBe(String(process.pid));
      // This process may take it again; letting go removes the file.
      lockHome(home);
      release();
      expect(existsSync(file)).toBe(false);
    }

    // Letting go does not remove a file another process made since.
    const release = lockHome(home);
    writeFileSync(file, String(holder));
    release();
    expect(readFileSync(file, 'utf8')).toBe(String(holder));
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("a build's ENV takes $NAME and ${NAME} from the environment before it; \\$ is a dollar", () => {
  const env = ['PATH=/usr/bin:/bin', 'HOME=/root'];
  expect(withVars(env, [['PATH', '/opt/x:$PATH'], ['GREETING', 'hi ${HOME} \\$HOME $UNSET.']])).toEqual(['HOME=/root', 'PATH=/opt/x:/usr/bin:/bin', 'GREETING=hi /root $HOME .']);
  // Within one step, a value sees the environment as it was before the step.
  expect(withVars(['A=1'], [['A', '2'], ['B', '$A']])).toEqual(['A=2', 'B=1']);
});

test("a COPY's source is cut before its first glob", () => {
  expect(['app/', 'file.txt', 'src/*.ts', '*.txt', 'a/b/**/c', 'x/[ab]'].map(copySource)).toEqual(['app/', 'file.txt', 'src', '.', 'a/b', 'x']);
});
