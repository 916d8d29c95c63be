// The server's pure pieces: egress validation, list queries, the spec loader,
// the data directory's lock.
import { validateEgress } from '../src/network.js';
import { decodeCursor, encodeCursor, parseMetadataFilter } from '../src/list-query.js';
import { loadOperations } from '../src/openapi.js';
import { resolveConfig } from '../src/config.js';
import { newApiKey } from '../src/store/keys.js';
import { lockHome } from '../src/home-lock.js';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

test('allowOut takes CIDRs, IPs and domains with a leading wildcard; denyOut only CIDRs and IPs', () => {
  expect(validateEgress('allowOut', ['10.0.0.0/8', '::1', '2001:db8::/32', 'example.com', '*.example.com', ' pypi.org '])).toEqual([
    '10.0.0.0/8',
    '::1',
    '2001:db8::/32',
    'example.com',
    '*.example.com',
    'pypi.org',
  ]);
  for (const bad of ['*', 'exa mple.com', '10.0.0.0/40', '1.2.3', 'a..b', '-x.com', '*.*.com', 'x'.repeat(64) + '.com', '']) {
    expect(() => validateEgress('allowOut', [bad])).toThrow(`allowOut[0] '${bad}'`);
  }
  expect(() => validateEgress('denyOut', ['example.com'])).toThrow('domains are allowed only in allowOut');
  expect(validateEgress('denyOut', ['0.0.0.0/0'])).toEqual(['0.0.0.0/0']);
  expect(validateEgress('allowOut', undefined)).toBeUndefined();
});

test('the metadata filter is a query string of URL-encoded keys and values', () => {
  // What the e2b SDK sends after the HTTP layer decoded the parameter once.
  const sdk = new URLSearchParams({ [encodeURIComponent('user id')]: encodeURIComponent('a&b=c'), x: encodeURIComponent('é') }).toString();
  expect(parseMetadataFilter(sdk)).toEqual({ 'user id': 'a&b=c', x: 'é' });
  expect(parseMetadataFilter('a=1&b=2')).toEqual({ a: '1', b: '2' });
  expect(parseMetadataFilter('')).toBeUndefined();
  expect(() => parseMetadataFilter('a=%E0%A4%A')).toThrow('is not a URL-encoded query string');
});

test('cursors round trip and forged ones are refused', () => {
  const c = { startedAt: 1700000000000, id: 'abc' };
  expect(decodeCursor(encodeCursor(c))).toEqual(c);
  expect(decodeCursor(undefined)).toBeUndefined();
  expect(() => decodeCursor('nonsense')).toThrow("nextToken 'nonsense' is not a cursor this server issued");
});

test('every operation of the spec becomes a route; `state` is a comma list; /health is public', () => {
  const ops = loadOperations();
  expect(ops.length).toBe(36);
  expect(new Set(ops.map((o) => o.operationId)).size).toBe(36);
  const list = ops.find((o) => o.operationId === 'getV2Sandboxes')!;
  expect(list).toMatchObject({ method: 'GET', routePath: '/v2/sandboxes', commaArrays: ['state'] });
  expect(list.schema.querystring?.properties).toHaveProperty('limit');
  const connect = ops.find((o) => o.operationId === 'postSandboxesSandboxIDConnect')!;
  expect(connect.routePath).toBe('/sandboxes/:sandboxID/connect');
  expect(connect.schema.body).toMatchObject({ type: 'object', required: ['timeout'] });
  expect(connect.bodyRequired).toBe(true);
  expect(ops.filter((o) => o.public).map((o) => o.operationId)).toEqual(['getHealth']);
  expect(JSON.stringify(ops)).not.toContain('$ref');
});

test('configuration: options over PADDOCK_* variables over defaults', () => {
  const saved = { ...process.env };
  try {
    delete process.env.PADDOCK_API_HOST;
    delete process.env.PADDOCK_PROXY_HOST;
    process.env.PADDOCK_API_PORT = '4000';
    process.env.PADDOCK_HOME = '/srv/paddock';
    const c = resolveConfig({ proxyPort: 4001 });
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
    expect(resolveConfig()).toMatchObject({ apiHost: '127.0.0.1', proxyHost: '0.0.0.0' });
    expect(resolveConfig({ proxyHost: '::1' }).proxyHost).toBe('::1');
    delete process.env.PADDOCK_PROXY_HOST;
    process.env.PADDOCK_API_PORT = 'many';
    expect(() => resolveConfig()).toThrow("PADDOCK_API_PORT='many' is not a non-negative number");
    delete process.env.PADDOCK_API_PORT;
    expect(() => resolveConfig({ defaultTimeoutSeconds: 100, maxTimeoutSeconds: 10 })).toThrow('longer than the maximum');
  } finally {
    process.env = saved;
  }
});

test('configuration: limits on client connections, by option, PADDOCK_* variable or default, and each at least 1', () => {
  const saved = { ...process.env };
  try {
    for (const name of ['HEADER_TIMEOUT_MS', 'BODY_TIMEOUT_MS', 'IDLE_TIMEOUT_MS', 'MAX_CONNECTIONS_PER_ADDRESS']) delete process.env[`PADDOCK_${name}`];
    expect(resolveConfig()).toMatchObject({ headerTimeoutMs: 20_000, bodyTimeoutMs: 30_000, idleTimeoutMs: 65_000, maxConnectionsPerAddress: 512 });
    process.env.PADDOCK_HEADER_TIMEOUT_MS = '5000';
    process.env.PADDOCK_BODY_TIMEOUT_MS = '6000';
    process.env.PADDOCK_IDLE_TIMEOUT_MS = '7000';
    process.env.PADDOCK_MAX_CONNECTIONS_PER_ADDRESS = '64';
    expect(resolveConfig({ idleTimeoutMs: 8000 })).toMatchObject({ headerTimeoutMs: 5000, bodyTimeoutMs: 6000, idleTimeoutMs: 8000, maxConnectionsPerAddress: 64 });
    process.env.PADDOCK_MAX_CONNECTIONS_PER_ADDRESS = '0';
    expect(() => resolveConfig()).toThrow('maxConnectionsPerAddress (PADDOCK_MAX_CONNECTIONS_PER_ADDRESS) is 0; it must be at least 1');
    expect(() => resolveConfig({ maxConnectionsPerAddress: 1, bodyTimeoutMs: 0 })).toThrow('bodyTimeoutMs (PADDOCK_BODY_TIMEOUT_MS) is 0; it must be at least 1');
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
