// What the kernel refuses with EPERM or EACCES reaches clients as
// permission_denied over Connect and as 403 over HTTP, naming the path.
//
// envd runs as root and does the work for every user itself, so mode bits
// never stop it (a user can read a root-only file through envd, as through
// E2B's envd). These tests use what stops root too: an immutable directory
// and file (chattr +i), and a write-only kernel attribute under /sys.
import { Code } from '@connectrpc/connect';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { failure, filesystem, startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
let locked: string;
let kept: string;

const chattr = (flag: '+i' | '-i', path: string) => execFileSync('chattr', [flag, path]);

beforeAll(async () => {
  envd = await startEnvd();
  locked = join(envd.dir, 'work/locked');
  kept = join(locked, 'kept.txt');
  mkdirSync(locked);
  writeFileSync(kept, 'kept');
  chattr('+i', kept);
  chattr('+i', locked);
});

afterAll(async () => {
  // Not even root removes an immutable entry: unlock before cleaning up.
  for (const path of [locked, kept]) {
    try {
      chattr('-i', path);
    } catch {
      // never made
    }
  }
  await envd.stop();
});

/** A kernel attribute that can be written and never read, whoever asks. */
function writeOnlyAttribute(): string {
  for (const bus of readdirSync('/sys/bus')) {
    const path = join('/sys/bus', bus, 'uevent');
    try {
      if ((statSync(path).mode & 0o777) === 0o200) return path;
    } catch {
      // no such attribute on this bus
    }
  }
  throw new Error('found no write-only /sys/bus/*/uevent to read');
}

test('over Connect, what the kernel refuses is permission_denied naming the path, and nothing changes', async () => {
  const fs = filesystem(envd, { user: 'user' });
  const sub = join(locked, 'sub');
  expect(await failure(fs.makeDir({ path: sub }))).toEqual({ code: Code.PermissionDenied, message: `permission denied on '${sub}'` });
  expect(existsSync(sub)).toBe(false);

  // Removing a tree names the entry inside it that could not go.
  for (const path of [kept, locked]) {
    expect(await failure(fs.remove({ path }))).toEqual({ code: Code.PermissionDenied, message: `permission denied on '${kept}'` });
  }
  expect(readFileSync(kept, 'utf8')).toBe('kept');

  const source = join(envd.dir, 'work/to-move');
  writeFileSync(source, 'moving');
  const destination = join(locked, 'moved');
  expect(await failure(fs.move({ source, destination }))).toEqual({
    code: Code.PermissionDenied,
    message: `permission denied on '${destination}'`,
  });
  expect(readFileSync(source, 'utf8')).toBe('moving');
  expect(existsSync(destination)).toBe(false);
});

describe('over HTTP, a refused write or read is 403 with a JSON body naming the path', () => {
  const auth = () => ({ 'x-access-token': envd.token! });
  const upload = (path: string, body: string) =>
    fetch(`${envd.url}/files?${new URLSearchParams({ path })}`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', ...auth() },
      body,
    });

  test('a new file in an immutable directory', async () => {
    const target = join(locked, 'new.txt');
    const res = await upload(target, 'x');
    expect([res.status, await res.json()]).toEqual([403, { code: 403, message: `permission denied on '${target}'` }]);
    expect(existsSync(target)).toBe(false);
  });

  test('rewriting an immutable file, as a plain body and as multipart', async () => {
    const res = await upload(kept, 'overwritten');
    expect([res.status, await res.json()]).toEqual([403, { code: 403, message: `permission denied on '${kept}'` }]);
    const form = new FormData();
    form.append('file', new Blob(['overwritten']), kept);
    const multi = await fetch(`${envd.url}/files`, { method: 'POST', headers: auth(), body: form });
    expect([multi.status, await multi.json()]).toEqual([403, { code: 403, message: `permission denied on '${kept}'` }]);
    expect(readFileSync(kept, 'utf8')).toBe('kept');
  });

  test('reading a write-only kernel attribute', async () => {
    const target = writeOnlyAttribute();
    const res = await fetch(`${envd.url}/files?${new URLSearchParams({ path: target, username: 'root' })}`, { headers: auth() });
    expect([res.status, await res.json()]).toEqual([403, { code: 403, message: `permission denied on '${target}'` }]);
  });
});
