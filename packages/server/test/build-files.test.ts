// The kept files of COPY steps: an upload is kept under its hash only when it
// is a whole tar archive, and a gzip-compressed one is kept unzipped (each
// COPY of it then reads a plain archive), unless it unzips to more than the
// largest upload, when it is kept as it came.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { tarOf } from '../../runtime/test/registry.js';
import { BuildFiles } from '../src/builds/build-files.js';

const HASH = 'a'.repeat(64);
let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'paddock-build-files-'));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const tar = tarOf([
  { path: 'app', type: 'Directory' },
  { path: 'app/main.txt', body: 'main\n' },
]);

test('a gzip-compressed upload is kept unzipped', async () => {
  const files = new BuildFiles(home, 1024 * 1024);
  await files.receive(HASH, Readable.from([gzipSync(tar)]));
  expect(readFileSync(files.path(HASH))).toEqual(tar);
  expect(readdirSync(join(home, 'build-files', 'tmp'))).toEqual([]);
});

test('an upload that is not compressed is kept as it came', async () => {
  const files = new BuildFiles(home, 1024 * 1024);
  await files.receive(HASH, Readable.from([tar]));
  expect(readFileSync(files.path(HASH))).toEqual(tar);
});

test('a gzip-compressed upload that unzips to more than the largest upload is kept compressed', async () => {
  // 64 KiB of zeros in the archive: a few hundred bytes compressed.
  const big = tarOf([{ path: 'zeros', body: '\0'.repeat(64 * 1024) }]);
  const gz = gzipSync(big);
  const files = new BuildFiles(home, 16 * 1024);
  expect(gz.length).toBeLessThan(16 * 1024);
  await files.receive(HASH, Readable.from([gz]));
  expect(readFileSync(files.path(HASH))).toEqual(gz);
  expect(readdirSync(join(home, 'build-files', 'tmp'))).toEqual([]);
});

test('a broken gzip upload is refused, and nothing is kept', async () => {
  const files = new BuildFiles(home, 1024 * 1024);
  const gz = gzipSync(tar);
  await expect(files.receive(HASH, Readable.from([gz.subarray(0, gz.length - 20)]))).rejects.toMatchObject({ message: expect.stringContaining('the upload is not a tar archive') });
  expect(files.has(HASH)).toBe(false);
  expect(readdirSync(join(home, 'build-files', 'tmp'))).toEqual([]);
});

test('a new upload under a hash drops what was kept unpacked of the one before, and a restart drops half-made ones', async () => {
  const files = new BuildFiles(home, 1024 * 1024);
  await files.receive(HASH, Readable.from([tar]));
  const { dir, scratch } = files.unpacked(HASH);
  mkdirSync(join(dir, 'files'), { recursive: true });
  mkdirSync(join(scratch, 'unpacked-cut-off', 'files'), { recursive: true });
  await files.receive(HASH, Readable.from([tar]));
  expect(existsSync(dir)).toBe(false);
  new BuildFiles(home, 1024 * 1024);
  expect(readdirSync(scratch)).toEqual([]);
});
