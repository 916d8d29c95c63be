// getHost, uploadUrl and downloadUrl are built locally, with no server.
import { createHash } from 'node:crypto';
import { InvalidArgumentError, Sandbox, TemplateError, type SandboxConnectionInfo } from '../src/index.js';

const info: SandboxConnectionInfo = {
  sandboxId: 'sbx123',
  envdVersion: '0.7.0',
  envdAccessToken: 'secret-token',
  sandboxDomain: 'localhost:3001',
};

/** The signature envd expects, computed here independently of the SDK. */
function signature(path: string, op: 'read' | 'write', user: string, token: string, expiration?: number): string {
  const raw = `${path}:${op}:${user}:${token}${expiration === undefined ? '' : `:${expiration}`}`;
  return 'v1_' + createHash('sha256').update(raw).digest('base64').replace(/=+$/, '');
}

describe('getHost', () => {
  test('is {port}-{id}.{domain} with the domain the server reported', () => {
    const sbx = Sandbox.fromConnectionInfo(info, { domain: 'configured.example' });
    expect(sbx.sandboxDomain).toBe('localhost:3001');
    expect(sbx.getHost(8080)).toBe('8080-sbx123.localhost:3001');
  });

  test('falls back to the configured domain, then to localhost:3001', () => {
    const { sandboxDomain: _, ...withoutDomain } = info;
    expect(Sandbox.fromConnectionInfo(withoutDomain, { domain: 'sbx.example.com' }).getHost(3000)).toBe('3000-sbx123.sbx.example.com');
    expect(Sandbox.fromConnectionInfo(withoutDomain, { sandboxUrl: 'http://127.0.0.1:3001' }).getHost(3000)).toBe('3000-sbx123.localhost:3001');
  });

  test('ignores the shared sandbox URL, which is for envd only', () => {
    expect(Sandbox.fromConnectionInfo(info, { sandboxUrl: 'http://proxy.internal:9999' }).getHost(80)).toBe('80-sbx123.localhost:3001');
  });

  test('refuses what is not a port', () => {
    const sbx = Sandbox.fromConnectionInfo(info, {});
    for (const port of [0, -1, 65536, 1.5]) expect(() => sbx.getHost(port)).toThrow(InvalidArgumentError);
  });
});

describe('file URLs', () => {
  test('in shared mode they are on the shared sandbox URL, with no sandbox id, signed', async () => {
    const sbx = Sandbox.fromConnectionInfo(info, { sandboxUrl: 'http://127.0.0.1:3001' });
    const down = new URL(await sbx.downloadUrl('/home/user/a b.txt'));
    expect(down.origin + down.pathname).toBe('http://127.0.0.1:3001/files');
    expect(down.searchParams.get('path')).toBe('/home/user/a b.txt');
    expect(down.searchParams.has('username')).toBe(false);
    expect(down.searchParams.get('signature')).toBe(signature('/home/user/a b.txt', 'read', '', 'secret-token'));
    expect(down.searchParams.has('signature_expiration')).toBe(false);
    expect(down.toString()).not.toContain('sbx123');
  });

  test('with a user and an expiration, both are signed', async () => {
    const sbx = Sandbox.fromConnectionInfo(info, { sandboxUrl: 'http://127.0.0.1:3001' });
    const before = Math.floor(Date.now() / 1000);
    const up = new URL(await sbx.uploadUrl('/tmp/in.bin', { user: 'root', useSignatureExpiration: 120 }));
    const expiration = Number(up.searchParams.get('signature_expiration'));
    expect(expiration).toBeGreaterThanOrEqual(before + 120);
    expect(expiration).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 120);
    expect(up.searchParams.get('username')).toBe('root');
    expect(up.searchParams.get('signature')).toBe(signature('/tmp/in.bin', 'write', 'root', 'secret-token', expiration));
  });

  test('an upload URL without a path leaves the targets to the parts', async () => {
    const sbx = Sandbox.fromConnectionInfo(info, { sandboxUrl: 'http://127.0.0.1:3001' });
    const up = new URL(await sbx.uploadUrl());
    expect(up.searchParams.has('path')).toBe(false);
    expect(up.searchParams.get('signature')).toBe(signature('', 'write', '', 'secret-token'));
  });

  test('with a domain instead, they are on the sandbox host', async () => {
    const sbx = Sandbox.fromConnectionInfo({ ...info, sandboxDomain: 'sbx.example.com' }, { domain: 'sbx.example.com' });
    const down = new URL(await sbx.downloadUrl('/etc/hosts'));
    expect(down.origin).toBe('https://49983-sbx123.sbx.example.com');
  });

  test('an insecure sandbox gets unsigned URLs, and an expiration is refused', async () => {
    const { envdAccessToken: _, ...insecure } = info;
    const sbx = Sandbox.fromConnectionInfo(insecure, {});
    const down = new URL(await sbx.downloadUrl('/etc/hosts'));
    expect(down.searchParams.has('signature')).toBe(false);
    await expect(sbx.downloadUrl('/etc/hosts', { useSignatureExpiration: 10 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe('connection info', () => {
  test('round-trips through fromConnectionInfo', () => {
    const sbx = Sandbox.fromConnectionInfo(info, {});
    expect(sbx.connectionInfo).toEqual({ ...info, trafficAccessToken: undefined });
    expect(sbx).toMatchObject({ sandboxId: 'sbx123', envdVersion: '0.7.0', trafficAccessToken: undefined });
  });

  test('an envd older than the SDK supports is a TemplateError', () => {
    expect(() => Sandbox.fromConnectionInfo({ ...info, envdVersion: '0.3.9' }, {})).toThrow(TemplateError);
    expect(() => Sandbox.fromConnectionInfo({ ...info, envdVersion: '0.4.0-rc.1' }, {})).toThrow(TemplateError);
    expect(() => Sandbox.fromConnectionInfo({ ...info, envdVersion: '0.4.0+build.5' }, {})).not.toThrow();
  });

  test('feature gates: an envd without closeStdin refuses it before any request', async () => {
    // Nothing listens on port 9; the gate must fire before a connection is tried.
    const sbx = Sandbox.fromConnectionInfo({ ...info, envdVersion: '0.5.1' }, { sandboxUrl: 'http://127.0.0.1:9' });
    await expect(sbx.commands.closeStdin(1)).rejects.toBeInstanceOf(TemplateError);
    await expect(sbx.files.write('a', 'b', { metadata: { k: 'v' } })).rejects.toBeInstanceOf(TemplateError);
  });

  test('an empty sandbox id is refused', () => {
    expect(() => Sandbox.fromConnectionInfo({ ...info, sandboxId: '' }, {})).toThrow(InvalidArgumentError);
  });
});
