// The pure pieces of envd, without a running daemon.
import { createHash } from 'node:crypto';
import { lstatSync, mkdtempSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basicAuthUser, checkAccess, checkFileSignature, fileSignature, secretsEqual } from '../src/auth.js';
import { permissionString } from '../src/entry-info.js';
import { EventQueue, HIGH_WATER_BYTES, MAX_JOINED_BYTES, type Joiner } from '../src/event-queue.js';
import { metadataFromHeaders } from '../src/metadata.js';
import { native } from '../src/native.js';
import { resolveUserPath } from '../src/paths.js';
import { UserDb } from '../src/users.js';

const user = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' };

describe('signatures', () => {
  test('match the documented formula: v1_ + unpadded base64 sha256 of path:op:user:token[:exp]', () => {
    const expected = 'v1_' + createHash('sha256').update('/home/user/a b.txt:read::tok:1700000000').digest('base64').replace(/=+$/, '');
    expect(fileSignature('/home/user/a b.txt', 'read', '', 'tok', 1700000000)).toBe(expected);
    expect(fileSignature('x', 'write', 'root', 'tok')).toBe(
      'v1_' + createHash('sha256').update('x:write:root:tok').digest('base64').replace(/=+$/, ''),
    );
  });

  test('are checked against the query as sent, expiry included', () => {
    const q = (o: Record<string, string>) => new URLSearchParams(o);
    const sig = fileSignature('p', 'read', 'user', 't', 100);
    expect(checkFileSignature(q({ path: 'p', username: 'user', signature: sig, signature_expiration: '100' }), 'read', 't', 99)).toEqual({ ok: true });
    expect(checkFileSignature(q({ path: 'p', username: 'user', signature: sig, signature_expiration: '100' }), 'read', 't', 101)).toEqual({
      ok: false,
      reason: 'signature is already expired',
    });
    expect(checkFileSignature(q({ path: 'p', signature: sig, signature_expiration: 'soon' }), 'read', 't')).toEqual({
      ok: false,
      reason: "signature_expiration 'soon' is not a unix time in seconds",
    });
  });

  test('one check lets a request in: no token set, the token, or for /files a valid signature', () => {
    const q = (o: Record<string, string>) => new URLSearchParams(o);
    const refused = { ok: false, reason: 'missing or invalid access token' };
    expect(checkAccess(undefined, null)).toEqual({ ok: true });
    expect(checkAccess('t', 't')).toEqual({ ok: true });
    expect(checkAccess('t', 'T')).toEqual(refused);
    expect(checkAccess('t', undefined)).toEqual(refused);
    const sig = fileSignature('p', 'read', 'user', 't');
    const signed = q({ path: 'p', username: 'user', signature: sig });
    expect(checkAccess('t', null, { params: signed, op: 'read' })).toEqual({ ok: true });
    expect(checkAccess('t', null, { params: signed, op: 'write' })).toEqual({ ok: false, reason: 'invalid signature' });
    // A signature does not stand in for the token where no file operation is named.
    expect(checkAccess('t', null)).toEqual(refused);
    expect(checkAccess('t', null, { params: q({ path: 'p' }), op: 'read' })).toEqual(refused);
    // The token is enough whatever the signature says.
    expect(checkAccess('t', 't', { params: q({ signature: 'forged' }), op: 'read' })).toEqual({ ok: true });
  });

  test('secrets compare equal only when identical, whatever the lengths', () => {
    expect(secretsEqual('abc', 'abc')).toBe(true);
    expect(secretsEqual('abc', 'abcd')).toBe(false);
    expect(secretsEqual(undefined, 'abc')).toBe(false);
    expect(secretsEqual('', '')).toBe(true);
  });
});

test('Basic authorization names the user before the colon', () => {
  expect(basicAuthUser(`Basic ${Buffer.from('user:').toString('base64')}`)).toBe('user');
  expect(basicAuthUser(`basic ${Buffer.from('root:ignored').toString('base64')}`)).toBe('root');
  expect(basicAuthUser('Bearer abc')).toBeUndefined();
  expect(basicAuthUser(undefined)).toBeUndefined();
});

test('paths resolve against the user home', () => {
  expect(resolveUserPath('a/b', user)).toBe('/home/user/a/b');
  expect(resolveUserPath('~', user)).toBe('/home/user');
  expect(resolveUserPath('~/x/../y', user)).toBe('/home/user/y');
  expect(resolveUserPath('/etc//hosts', user)).toBe('/etc/hosts');
  expect(resolveUserPath('', user)).toBe('/home/user');
  expect(resolveUserPath('../../etc/passwd', user)).toBe('/etc/passwd');
});

test('permission strings follow ls -l, with setuid, setgid and sticky bits', () => {
  const dir = mkdtempSync(join(tmpdir(), 'perm-'));
  try {
    const f = join(dir, 'f');
    writeFileSync(f, '');
    const cases: Array<[number, string]> = [
      [0o644, '-rw-r--r--'],
      [0o4755, '-rwsr-xr-x'],
      [0o2644, '-rw-r-Sr--'],
      [0o1777, '-rwxrwxrwt'],
      [0o000, '----------'],
    ];
    for (const [mode, text] of cases) {
      chmodSync(f, mode);
      expect(permissionString(lstatSync(f, { bigint: true }))).toBe(text);
    }
    expect(permissionString(lstatSync(dir, { bigint: true }))).toMatch(/^d/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('the users database reads passwd and group files and sees changes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'users-'));
  try {
    writeFileSync(join(dir, 'passwd'), '# comment\nroot:x:0:0:root:/root:/bin/bash\nbad line\nuser:x:1000:1000::/home/user:/bin/sh\n');
    writeFileSync(join(dir, 'group'), 'root:x:0:\nuser:x:1000:\n');
    const db = new UserDb(join(dir, 'passwd'), join(dir, 'group'));
    expect(db.lookup('user')).toEqual({ name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/sh' });
    expect(db.lookup('nobody')).toBeUndefined();
    const names = db.names();
    expect([names.user(1000), names.user(4242), names.group(0), names.group(7)]).toEqual(['user', '4242', 'root', '7']);
    writeFileSync(join(dir, 'passwd'), 'root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/sh\nnewbie:x:1001:1001::/home/newbie:/bin/sh\n');
    expect(db.lookup('newbie')?.uid).toBe(1001);
    expect(db.names().user(1001)).toBe('newbie');
    // Names taken before the change keep what the files said then.
    expect(names.user(1001)).toBe('1001');
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('metadata headers are validated and lowercased', () => {
  expect(metadataFromHeaders({ 'content-type': 'x' })).toBeUndefined();
  expect(metadataFromHeaders({ 'x-metadata-Owner': 'Al' })).toEqual({ owner: 'Al' });
  expect(() => metadataFromHeaders({ 'x-metadata-k': 'caf\u00e9' })).toThrow('metadata value of "k" must be printable ASCII');
});

test('extended attributes through the addon: set, read by prefix, removed (a missing one too); failures carry the errno and the path', () => {
  const dir = mkdtempSync(join(tmpdir(), 'envd-xattr-'));
  try {
    const file = join(dir, 'f');
    writeFileSync(file, '');
    native.setXattr(file, 'user.t.a', 'one');
    native.setXattr(file, 'user.t.b', 'two');
    native.setXattr(file, 'user.other', 'x');
    expect(native.getXattrs(file, 'user.t.')).toEqual({ a: 'one', b: 'two' });
    native.removeXattr(file, 'user.t.a');
    native.removeXattr(file, 'user.t.a');
    expect(native.getXattrs(file, 'user.t.')).toEqual({ b: 'two' });
    const missing = join(dir, 'missing');
    expect(() => native.setXattr(missing, 'user.t.a', 'v')).toThrow(expect.objectContaining({ code: 'ENOENT', message: expect.stringContaining(`lsetxattr '${missing}'`) }));
    expect(() => native.removeXattr(missing, 'user.t.a')).toThrow(expect.objectContaining({ code: 'ENOENT', message: expect.stringContaining('lremovexattr') }));
    expect(() => native.getXattrs(missing, 'user.t.')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    // The addon's TypeError is of Node's realm, not jest's: compared by name.
    expect(() => native.setXattr(file, 'user.t.a', 7 as unknown as string)).toThrow(expect.objectContaining({ name: 'TypeError', message: 'expected a string' }));
    expect(native.getXattrs(file, 'user.t.')).toEqual({ b: 'two' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('Uint8Array.prototype.toBase64 is there for protobuf-es, with both alphabets and optional padding', async () => {
  await import('../src/base64.js');
  const encode = (bytes: number[], options?: object) => (new Uint8Array(bytes) as unknown as { toBase64(o?: object): string }).toBase64(options);
  expect(encode([])).toBe('');
  expect(encode([0xfb, 0xff])).toBe('+/8=');
  expect(encode([0xfb, 0xff], { omitPadding: true })).toBe('+/8');
  expect(encode([0xfb, 0xff], { alphabet: 'base64url' })).toBe('-_8=');
  expect(encode([0xfb, 0xff], { alphabet: 'base64url', omitPadding: true })).toBe('-_8');
  expect(encode([1, 2, 3])).toBe('AQID');
  // A view encodes its own bytes, not its whole buffer.
  const view = new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4) as unknown as { toBase64(): string };
  expect(view.toBase64()).toBe('AQID');
  expect(() => encode([1], { alphabet: 'base32' })).toThrow(TypeError);
});

describe('event queue', () => {
  test('delivers in order, then ends; an error comes after the queued items', async () => {
    const q = new EventQueue<number>();
    q.push(1);
    q.push(2);
    q.close(new Error('boom'));
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const v of q) seen.push(v);
      })(),
    ).rejects.toThrow('boom');
    expect(seen).toEqual([1, 2]);
  });

  test('counts bytes, reports full, and calls onDrain once it empties below the low mark', async () => {
    const q = new EventQueue<string>();
    let drained = 0;
    q.onDrain = () => void drained++;
    q.push('a', HIGH_WATER_BYTES);
    expect(q.full).toBe(true);
    const it = q[Symbol.asyncIterator]();
    await it.next();
    expect(q.bytes).toBe(0);
    expect(drained).toBe(1);
  });

  test('items waiting next to each other are joined when the joiner allows, up to a size, in order', async () => {
    // Strings of one letter join; anything else stays apart.
    const joiner: Joiner<string> = {
      joinable: (first, next) => first[0] === next[0],
      join: (values) => values.join(''),
    };
    const q = new EventQueue<string>(joiner);
    for (const v of ['a1', 'a2', 'b1', 'a3']) q.push(v, 10);
    q.push('a4', MAX_JOINED_BYTES - 10);
    q.push('a5', 10);
    q.close();
    const seen: string[] = [];
    for await (const v of q) {
      seen.push(v);
      if (seen.length === 1) expect(q.bytes).toBe(MAX_JOINED_BYTES + 20);
    }
    expect(seen).toEqual(['a1a2', 'b1', 'a3a4', 'a5']);
    expect(q.bytes).toBe(0);
  });

  test('joined items count as drained once taken', async () => {
    const joiner: Joiner<string> = {
      joinable: (first, next) => first[0] === next[0],
      join: (values) => values.join(''),
    };
    const q = new EventQueue<string>(joiner);
    let drained = 0;
    q.onDrain = () => void drained++;
    for (const v of ['a1', 'a2', 'b1']) q.push(v, HIGH_WATER_BYTES / 2);
    expect(q.full).toBe(true);
    const it = q[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ value: 'a1a2', done: false });
    expect(drained).toBe(0); // half the mark still waits
    expect(await it.next()).toEqual({ value: 'b1', done: false });
    expect(drained).toBe(1);
    // An item pushed to a waiting reader goes to it alone.
    const waiting = it.next();
    q.push('a3', 10);
    expect(await waiting).toEqual({ value: 'a3', done: false });
    q.close();
    expect(await it.next()).toEqual({ value: undefined, done: true });
  });

  test('a reader gets the error the queue closes with, after what was queued', async () => {
    const q = new EventQueue<string>();
    const it = q[Symbol.asyncIterator]();
    const waiting = it.next();
    q.close(new Error('gone'));
    await expect(waiting).rejects.toThrow('gone');

    const q2 = new EventQueue<string>();
    q2.push('a', 1);
    q2.close(new Error('later'));
    const it2 = q2[Symbol.asyncIterator]();
    expect(await it2.next()).toEqual({ value: 'a', done: false });
    await expect(it2.next()).rejects.toThrow('later');
  });

  test('a reader that stops reading drops what waits and closes the queue', async () => {
    const q = new EventQueue<string>();
    let closes = 0;
    q.onClose = () => void closes++;
    q.push('a', 100);
    for await (const item of q) {
      expect(item).toBe('a');
      q.push('b', 100);
      break;
    }
    expect(q.closed).toBe(true);
    expect(q.bytes).toBe(0);
    expect(closes).toBe(1);
  });

  test('a reader waiting when the queue closes sees the end; onClose runs once', async () => {
    const q = new EventQueue<number>();
    let closes = 0;
    q.onClose = () => void closes++;
    const it = q[Symbol.asyncIterator]();
    const pending = it.next();
    q.close();
    q.close();
    expect(await pending).toEqual({ value: undefined, done: true });
    expect(closes).toBe(1);
  });
});
