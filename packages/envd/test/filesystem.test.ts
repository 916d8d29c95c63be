// The filesystem.Filesystem service over the wire, JSON and binary.
import { Code } from '@connectrpc/connect';
import { lstatSync, mkdirSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FileType } from '@paddock/models';
import { CONNECT_FORMATS, failure, filesystem, startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd();
});
afterAll(() => envd.stop());

describe.each(CONNECT_FORMATS)('Filesystem over %s', (_name, binary) => {
  const fs = () => filesystem(envd, { binary });

  test('MakeDir creates missing parents owned by the acting user, then says already_exists', async () => {
    const dir = join(envd.dir, `work/mk-${binary}/a/b`);
    const res = await filesystem(envd, { binary, user: 'user' }).makeDir({ path: dir });
    expect(res.entry).toMatchObject({ name: 'b', type: FileType.DIRECTORY, path: dir, owner: 'user', group: 'user', mode: 0o755 });
    expect(res.entry?.permissions).toBe('drwxr-xr-x');
    expect(lstatSync(join(envd.dir, `work/mk-${binary}`)).uid).toBe(1000);
    const again = await failure(fs().makeDir({ path: dir }));
    expect(again.code).toBe(Code.AlreadyExists);
    expect(again.message).toContain(dir);
  });

  test('Stat describes a file and answers not_found for a missing path', async () => {
    const file = join(envd.dir, `work/stat-${binary}.txt`);
    writeFileSync(file, 'twelve bytes');
    const { entry } = await fs().stat({ path: file });
    expect(entry).toMatchObject({ name: `stat-${binary}.txt`, type: FileType.FILE, size: 12n, owner: 'root', permissions: '-rw-r--r--' });
    expect(Number(entry!.modifiedTime!.seconds)).toBeGreaterThan(Date.now() / 1000 - 60);
    const missing = await failure(fs().stat({ path: join(envd.dir, 'nope') }));
    expect(missing).toEqual({ code: Code.NotFound, message: `path '${join(envd.dir, 'nope')}' does not exist` });
  });
});

test('relative paths and ~ resolve under the acting user\'s home', async () => {
  const asUser = filesystem(envd, { user: 'user' });
  await asUser.makeDir({ path: 'projects' });
  expect((await asUser.stat({ path: '~/projects' })).entry?.path).toBe(join(envd.home.user, 'projects'));
  expect((await filesystem(envd, { user: 'root' }).makeDir({ path: 'rootdir' })).entry?.path).toBe(join(envd.home.root, 'rootdir'));
});

test('without a user header the default user (user) acts', async () => {
  const { entry } = await filesystem(envd).makeDir({ path: 'by-default' });
  expect(entry).toMatchObject({ path: join(envd.home.user, 'by-default'), owner: 'user' });
});

test('ListDir returns entries depth-first in name order, down to depth', async () => {
  const root = join(envd.dir, 'work/tree');
  for (const d of ['b/y', 'a/x/deep', 'c']) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, 'a/file'), '');
  writeFileSync(join(root, 'a/x/deep/leaf'), '');
  const fs = filesystem(envd);
  const names = async (depth: number) => (await fs.listDir({ path: root, depth })).entries.map((e) => e.path.slice(root.length + 1));
  expect(await names(1)).toEqual(['a', 'b', 'c']);
  expect(await names(0)).toEqual(['a', 'b', 'c']);
  expect(await names(2)).toEqual(['a', 'a/file', 'a/x', 'b', 'b/y', 'c']);
  expect(await names(10)).toEqual(['a', 'a/file', 'a/x', 'a/x/deep', 'a/x/deep/leaf', 'b', 'b/y', 'c']);
});

test('ListDir on a file is invalid_argument, on a missing path not_found', async () => {
  const file = join(envd.dir, 'work/plain');
  writeFileSync(file, 'x');
  const fs = filesystem(envd);
  expect(await failure(fs.listDir({ path: file }))).toEqual({ code: Code.InvalidArgument, message: `path '${file}' is not a directory` });
  expect((await failure(fs.listDir({ path: join(envd.dir, 'missing') }))).code).toBe(Code.NotFound);
});

test('symlinks are listed as such with an absolute target, and not followed', async () => {
  const root = join(envd.dir, 'work/links');
  mkdirSync(join(root, 'target-dir/inner'), { recursive: true });
  symlinkSync('target-dir', join(root, 'link'));
  expect(readlinkSync(join(root, 'link'))).toBe('target-dir');
  const entries = (await filesystem(envd).listDir({ path: root, depth: 3 })).entries;
  const link = entries.find((e) => e.name === 'link');
  expect(link).toMatchObject({ type: FileType.SYMLINK, symlinkTarget: join(root, 'target-dir') });
  expect(link?.permissions.startsWith('l')).toBe(true);
  expect(entries.map((e) => e.name)).toEqual(['link', 'target-dir', 'inner']);
});

test('Move renames, creating the destination\'s parents, and answers not_found for a missing source', async () => {
  const src = join(envd.dir, 'work/move-me');
  writeFileSync(src, 'data');
  const dst = join(envd.dir, 'work/new/parent/moved');
  const fs = filesystem(envd);
  const { entry } = await fs.move({ source: src, destination: dst });
  expect(entry).toMatchObject({ path: dst, name: 'moved', size: 4n });
  expect((await failure(fs.stat({ path: src }))).code).toBe(Code.NotFound);
  expect((await failure(fs.move({ source: src, destination: dst }))).code).toBe(Code.NotFound);
});

test('Remove deletes trees and succeeds for missing paths', async () => {
  const root = join(envd.dir, 'work/remove');
  mkdirSync(join(root, 'a/b'), { recursive: true });
  writeFileSync(join(root, 'a/b/f'), 'x');
  const fs = filesystem(envd);
  await fs.remove({ path: root });
  expect((await failure(fs.stat({ path: root }))).code).toBe(Code.NotFound);
  await expect(fs.remove({ path: root })).resolves.toBeDefined();
  // A symlink goes, not what it points to.
  const target = join(envd.dir, 'work/remove-target');
  mkdirSync(target);
  writeFileSync(join(target, 'stays'), 'x');
  symlinkSync(target, join(envd.dir, 'work/remove-link'));
  await fs.remove({ path: join(envd.dir, 'work/remove-link') });
  expect(() => lstatSync(join(envd.dir, 'work/remove-link'))).toThrow();
  expect(lstatSync(join(target, 'stays')).isFile()).toBe(true);
});

test('Move onto a directory that is not empty is failed_precondition naming it', async () => {
  const src = join(envd.dir, 'work/move-dir');
  const dst = join(envd.dir, 'work/full-dir');
  mkdirSync(src);
  mkdirSync(dst);
  writeFileSync(join(dst, 'occupant'), 'x');
  expect(await failure(filesystem(envd).move({ source: src, destination: dst }))).toEqual({
    code: Code.FailedPrecondition,
    message: `directory '${dst}' is not empty`,
  });
  expect(lstatSync(join(dst, 'occupant')).isFile()).toBe(true);
});

test('MakeDir over an existing file is invalid_argument', async () => {
  const file = join(envd.dir, 'work/a-file');
  writeFileSync(file, 'x');
  expect(await failure(filesystem(envd).makeDir({ path: file }))).toEqual({
    code: Code.InvalidArgument,
    message: `path '${file}' exists and is not a directory`,
  });
});

test('an unknown user is invalid_argument naming the user', async () => {
  expect(await failure(filesystem(envd, { user: 'mallory' }).stat({ path: '/' }))).toEqual({
    code: Code.InvalidArgument,
    message: "user 'mallory' does not exist",
  });
});

test('a missing or wrong access token is unauthenticated', async () => {
  expect((await failure(filesystem(envd, { token: null }).stat({ path: '/' }))).code).toBe(Code.Unauthenticated);
  expect((await failure(filesystem(envd, { token: 'wrong' }).stat({ path: '/' }))).code).toBe(Code.Unauthenticated);
});

test('unknown JSON fields in requests are ignored', async () => {
  const res = await fetch(`${envd.url}/filesystem.Filesystem/Stat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'connect-protocol-version': '1', 'x-access-token': envd.token! },
    body: JSON.stringify({ path: '/', someFutureField: true }),
  });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ entry: { path: '/', type: 'FILE_TYPE_DIRECTORY' } });
});
