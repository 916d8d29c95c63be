import { createHash } from 'node:crypto';
import { EnvdArgumentError, EnvdClient, fileSignature, fileUrl } from '../src/index.js';

// The reference: computed here with node:crypto, independently of the client's Web Crypto code.
function expected(path: string, op: string, user: string, token: string, expiration?: number): string {
  const raw = expiration === undefined ? `${path}:${op}:${user}:${token}` : `${path}:${op}:${user}:${token}:${expiration}`;
  return 'v1_' + createHash('sha256').update(raw).digest('base64').replace(/=+$/, '');
}

describe('file signatures', () => {
  test('match sha256 of "{path}:{op}:{user}:{token}" in base64 without padding', async () => {
    const sig = await fileSignature({ path: '/home/user/a b.txt', operation: 'read', user: 'user', accessToken: 'secret' });
    expect(sig).toBe(expected('/home/user/a b.txt', 'read', 'user', 'secret'));
    expect(sig).not.toMatch(/=$/);
  });

  test('use an empty user when none is given, and append the expiration', async () => {
    const sig = await fileSignature({ path: 'x', operation: 'write', accessToken: 't', expiration: 1_700_000_000 });
    expect(sig).toBe(expected('x', 'write', '', 't', 1_700_000_000));
  });

  test('differ between read and write', async () => {
    const read = await fileSignature({ path: '/f', operation: 'read', accessToken: 't' });
    const write = await fileSignature({ path: '/f', operation: 'write', accessToken: 't' });
    expect(read).not.toBe(write);
  });
});

describe('signed URLs', () => {
  test('a download URL carries path, username and signature', async () => {
    const url = new URL(
      await fileUrl({ envdUrl: 'https://49983-sbx.example.test', path: '/home/user/a b.txt', operation: 'read', user: 'root', accessToken: 'tok' }),
    );
    expect(url.origin + url.pathname).toBe('https://49983-sbx.example.test/files');
    expect(url.searchParams.get('path')).toBe('/home/user/a b.txt');
    expect(url.searchParams.get('username')).toBe('root');
    expect(url.searchParams.get('signature')).toBe(expected('/home/user/a b.txt', 'read', 'root', 'tok'));
    expect(url.searchParams.has('signature_expiration')).toBe(false);
    // Spaces travel as '+', as URLSearchParams writes them.
    expect(url.search).toContain('path=%2Fhome%2Fuser%2Fa+b.txt');
  });

  test('an expiring URL signs the expiration it carries, in unix seconds from now', async () => {
    const before = Math.floor(Date.now() / 1000);
    const url = new URL(await fileUrl({ envdUrl: 'http://h:1', path: 'f', operation: 'write', accessToken: 'tok', expiresInSeconds: 120 }));
    const after = Math.floor(Date.now() / 1000);
    const expiration = Number(url.searchParams.get('signature_expiration'));
    expect(expiration).toBeGreaterThanOrEqual(before + 120);
    expect(expiration).toBeLessThanOrEqual(after + 120);
    expect(url.searchParams.get('signature')).toBe(expected('f', 'write', '', 'tok', expiration));
    expect(url.searchParams.has('username')).toBe(false);
  });

  test('without a token the URL is plain, and an expiration is refused', async () => {
    const url = new URL(await fileUrl({ envdUrl: 'http://h:1/prefix/', path: '/a', operation: 'read' }));
    expect(url.pathname).toBe('/prefix/files');
    expect([...url.searchParams.keys()]).toEqual(['path']);
    await expect(fileUrl({ envdUrl: 'http://h:1', path: '/a', operation: 'read', expiresInSeconds: 5 })).rejects.toThrow(
      EnvdArgumentError,
    );
  });

  test("the client signs with its token and default user; an upload URL may have no path", async () => {
    const c = new EnvdClient({ envdUrl: 'http://127.0.0.1:9', accessToken: 'tok', user: 'user' });
    const down = new URL(await c.downloadUrl('/etc/hosts'));
    expect(down.searchParams.get('signature')).toBe(expected('/etc/hosts', 'read', 'user', 'tok'));
    const up = new URL(await c.uploadUrl(undefined, { user: 'root' }));
    expect(up.searchParams.has('path')).toBe(false);
    expect(up.searchParams.get('signature')).toBe(expected('', 'write', 'root', 'tok'));
  });
});
