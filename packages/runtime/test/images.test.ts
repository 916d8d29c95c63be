// The image store against a real registry (Debian's docker-registry on
// 127.0.0.1) with images this test builds and pushes with skopeo: layers in
// overlayfs form and shifted ownership, seen through a real overlay mount;
// platforms, digests, auth, and every kind of bad input, each refused with
// an error that names the image and leaves nothing behind.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zstdCompressSync } from 'node:zlib';
import { create, extract } from 'tar';
import { ImageStore, type Image, type LayerProgress } from '../src/images/index.js';
import { RuntimeError } from '../src/runtime.js';
import { hostArch, OciLayout, PASSWORD, startRegistry, tarOf, USER, type BuiltImage, type TestRegistry } from './registry.js';

const SHIFT = 1_000_000_000;

let work: string;
let registry: TestRegistry;
let layout: OciLayout;
const stores: ImageStore[] = [];

/** A fresh store in its own directory. */
async function openStore(opts: Partial<ConstructorParameters<typeof ImageStore>[0]> = {}): Promise<ImageStore> {
  const store = new ImageStore({ dir: mkdtempSync(join(work, 'store-')), idShift: SHIFT, ...opts });
  await store.open();
  stores.push(store);
  return store;
}

/** Builds an image in the shared layout and pushes it to `registry` as `name:tag`. */
async function pushImage(name: string, layers: Buffer[], opts: Parameters<OciLayout['image']>[1] & { to?: TestRegistry } = {}): Promise<BuiltImage & { ref: string }> {
  const tag = `t${Math.random().toString(36).slice(2, 10)}`;
  const image = layout.image(layers, { ...opts, tag });
  const to = opts.to ?? registry;
  await to.push(layout.dir, tag, name);
  return { ...image, ref: `${to.host}/${name}:${tag}` };
}

/** Resolves with the RuntimeError `p` rejects with (failing when it does not). */
async function refusal(p: Promise<unknown>): Promise<RuntimeError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof RuntimeError)) throw new Error(`expected a RuntimeError, got ${err === undefined ? 'success' : String(err)}`);
  return err;
}

/** Nothing half-made: no work directory and no layer beyond `layers`. */
function expectClean(store: ImageStore, layers: string[] = []): void {
  expect(readdirSync(join(store.dir, 'tmp'))).toEqual([]);
  expect(readdirSync(join(store.dir, 'sha256')).sort()).toEqual(layers.map((d) => d.slice(7)).sort());
}

const base = tarOf([
  { path: 'etc/', type: 'Directory' },
  { path: 'etc/keep', body: 'kept\n' },
  { path: 'etc/gone', body: 'deleted above\n' },
  { path: 'opq/', type: 'Directory', mode: 0o750 },
  { path: 'opq/old1', body: 'hidden by an opaque dir\n' },
  { path: 'opq/sub/', type: 'Directory' },
  { path: 'opq/sub/old2', body: 'also hidden\n' },
  { path: 'home/user/', type: 'Directory', uid: 1000, gid: 1000, mode: 0o700 },
  { path: 'home/user/notes', body: 'mine\n', uid: 1000, gid: 1000, mode: 0o640 },
  { path: 'bin/', type: 'Directory' },
  { path: 'bin/su', body: '#!/bin/true\n', mode: 0o4755 },
  { path: 'bin/sh', type: 'SymbolicLink', linkpath: '/bin/busybox' },
  { path: 'bin/keep-again', type: 'Link', linkpath: 'etc/keep' },
  { path: 'run/fifo', type: 'FIFO', mode: 0o600 },
]);
const top = tarOf([
  { path: 'etc/.wh.gone' },
  { path: 'opq/', type: 'Directory', mode: 0o750 },
  { path: 'opq/.wh..wh..opq' },
  { path: 'opq/new', body: 'the only file in opq\n' },
]);

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'paddock-images-'));
  layout = new OciLayout(join(work, 'layout'));
  registry = await startRegistry();
});

afterAll(async () => {
  for (const s of stores) await s.close();
  await registry?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('pull', () => {
  let pushed: BuiltImage & { ref: string };
  let store: ImageStore;
  let image: Image;
  const progress: LayerProgress[] = [];

  beforeAll(async () => {
    pushed = await pushImage('paddock/layers', [base, top]);
    store = await openStore();
    image = await store.pull(pushed.ref, { onProgress: (p) => progress.push(p) });
  });

  test('records the image by its manifest digest, with its config and layers bottom first', async () => {
    expect(image.id).toBe(pushed.manifest.digest);
    expect(image.references).toEqual([pushed.ref, `${pushed.ref.split(':').slice(0, 2).join(':')}@${pushed.manifest.digest}`]);
    expect(image.diffIds).toEqual(pushed.diffIds);
    expect(image.config).toEqual({ env: ['PATH=/usr/bin:/bin', 'HELLO=world'], workingDir: '/work', cmd: ['/bin/sh'] });
    expect(image.size).toBe(base.length + top.length);
    expect(await store.get(pushed.ref)).toEqual(image);
    expect(await store.get(image.id)).toEqual(image);
    expect(store.layerDirs(image)).toEqual(pushed.diffIds.map((d) => join(store.dir, 'sha256', d.slice(7), 'fs')).reverse());
    expectClean(store, pushed.diffIds);
  });

  test('reports each layer downloading up to its size, then done; a second pull finds them there', async () => {
    for (const digest of pushed.layerDigests) {
      const mine = progress.filter((p) => p.layer === digest);
      expect(mine[0]?.state).toBe('downloading');
      expect(mine.at(-1)).toMatchObject({ state: 'done' });
      expect(mine.filter((p) => p.state === 'downloading').at(-1)?.bytes).toBe(mine[0]?.total);
    }
    const again: LayerProgress[] = [];
    await store.pull(pushed.ref, { onProgress: (p) => again.push(p) });
    expect(again.map((p) => p.state)).toEqual(['exists', 'exists']);
  });

  test('layers are in overlayfs form: a whiteout is a character device 0/0, an opaque directory has its xattr', () => {
    const [topDir] = store.layerDirs(image);
    const whiteout = lstatSync(join(topDir!, 'etc/gone'));
    expect(whiteout.isCharacterDevice()).toBe(true);
    expect(whiteout.rdev).toBe(0);
    expect([whiteout.uid, whiteout.gid]).toEqual([SHIFT, SHIFT]);
    expect(execFileSync('getfattr', ['--only-values', '-n', 'trusted.overlay.opaque', join(topDir!, 'opq')], { encoding: 'utf8' })).toBe('y');
    expect(existsSync(join(topDir!, 'opq/.wh..wh..opq'))).toBe(false);
    expect(existsSync(join(topDir!, 'etc/.wh.gone'))).toBe(false);
  });

  test('an overlay of the layers shows the image: deleted files gone, the opaque directory only with its own files', () => {
    const mnt = mkdtempSync(join(work, 'mnt-'));
    execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${store.layerDirs(image).join(':')}`, mnt]);
    try {
      expect(readFileSync(join(mnt, 'etc/keep'), 'utf8')).toBe('kept\n');
      expect(existsSync(join(mnt, 'etc/gone'))).toBe(false);
      expect(readdirSync(join(mnt, 'opq'))).toEqual(['new']);
      expect(readlinkSync(join(mnt, 'bin/sh'))).toBe('/bin/busybox');
      expect(statSync(join(mnt, 'bin/keep-again')).ino).toBe(statSync(join(mnt, 'etc/keep')).ino);
      expect(lstatSync(join(mnt, 'run/fifo')).isFIFO()).toBe(true);
    } finally {
      execFileSync('umount', [mnt]);
    }
  });

  test('ownership is shifted into the sandbox range, modes (setuid too) and times kept', () => {
    const [, baseDir] = store.layerDirs(image);
    const notes = lstatSync(join(baseDir!, 'home/user/notes'));
    expect([notes.uid, notes.gid, notes.mode & 0o7777]).toEqual([SHIFT + 1000, SHIFT + 1000, 0o640]);
    expect(notes.mtime.toISOString()).toBe('2024-01-02T03:04:05.000Z');
    const home = lstatSync(join(baseDir!, 'home/user'));
    expect([home.uid, home.mode & 0o7777]).toEqual([SHIFT + 1000, 0o700]);
    const su = lstatSync(join(baseDir!, 'bin/su'));
    expect([su.uid, su.mode & 0o7777]).toEqual([SHIFT, 0o4755]);
    // Directories the tar does not list are made for it, owned by the sandbox's root.
    const run = lstatSync(join(baseDir!, 'run'));
    expect([run.uid, run.gid, run.mode & 0o7777]).toEqual([SHIFT, SHIFT, 0o755]);
    expect(lstatSync(join(baseDir!, 'bin/sh')).uid).toBe(SHIFT);
    expect(lstatSync(baseDir!).uid).toBe(SHIFT);
  });

  test('by digest, and images that share a layer share its directory', async () => {
    const byDigest = await store.pull(`${registry.host}/paddock/layers@${pushed.manifest.digest}`);
    expect(byDigest.id).toBe(pushed.manifest.digest);
    const other = await pushImage('paddock/other', [base, tarOf([{ path: 'other', body: 'x' }])]);
    const seen: LayerProgress[] = [];
    const second = await store.pull(other.ref, { onProgress: (p) => seen.push(p) });
    expect(store.layerDirs(second)[1]).toBe(store.layerDirs(image)[1]);
    expect(seen.find((p) => p.layer === other.layerDigests[0])?.state).toBe('exists');
  });

  test('a zstd layer', async () => {
    const zstdLayer = tarOf([{ path: 'z', body: 'zstd' }]);
    const blob = layout.blob(zstdCompressSync(zstdLayer));
    const diffId = `sha256:${createHash('sha256').update(zstdLayer).digest('hex')}`;
    const config = layout.blob(Buffer.from(JSON.stringify({ architecture: hostArch(), os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [diffId] } })));
    const manifest = layout.blob(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd', ...blob }] })));
    layout.tag('zstd2', { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifest });
    await registry.push(layout.dir, 'zstd2', 'paddock/zstd');
    expect((await registry.manifest('paddock/zstd', 'zstd2')).layers[0]?.mediaType).toBe('application/vnd.oci.image.layer.v1.tar+zstd');
    const s = await openStore();
    const img = await s.pull(`${registry.host}/paddock/zstd:zstd2`);
    expect(readFileSync(join(s.layerDirs(img)[0]!, 'z'), 'utf8')).toBe('zstd');
  });

  test('an uncompressed layer', async () => {
    const image = layout.image([tarOf([{ path: 'p', body: 'plain' }])], { compress: false });
    await registry.upload(layout.dir, 'paddock/plain', 'v1', image.manifest.digest);
    expect((await registry.manifest('paddock/plain', 'v1')).layers[0]?.mediaType).toBe('application/vnd.oci.image.layer.v1.tar');
    const s = await openStore();
    const img = await s.pull(`${registry.host}/paddock/plain:v1`);
    expect(img.diffIds).toEqual(image.layerDigests);
    expect(readFileSync(join(s.layerDirs(img)[0]!, 'p'), 'utf8')).toBe('plain');
  });
});

describe('platforms', () => {
  const other = hostArch() === 'arm64' ? 'amd64' : 'arm64';

  test("from a multi-arch index, the host's platform is pulled", async () => {
    const mine = layout.image([tarOf([{ path: 'arch', body: hostArch() }])]);
    const theirs = layout.image([tarOf([{ path: 'arch', body: other }])], { architecture: other });
    layout.multiArch('multi', [
      { image: theirs, architecture: other },
      { image: mine, architecture: hostArch() },
    ]);
    await registry.push(layout.dir, 'multi', 'paddock/multi', { all: true });
    const store = await openStore();
    const image = await store.pull(`${registry.host}/paddock/multi:multi`);
    expect(image.id).toBe(mine.manifest.digest);
    expect(readFileSync(join(store.layerDirs(image)[0]!, 'arch'), 'utf8')).toBe(hostArch());
  });

  test('an index without the host platform, or an image for another, is refused by name', async () => {
    const theirs = layout.image([tarOf([{ path: 'arch', body: other }])], { architecture: other });
    layout.multiArch('foreign', [{ image: theirs, architecture: other }]);
    await registry.push(layout.dir, 'foreign', 'paddock/foreign', { all: true });
    const store = await openStore();
    const err = await refusal(store.pull(`${registry.host}/paddock/foreign:foreign`));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain(`image '${registry.host}/paddock/foreign:foreign' has no linux/${hostArch()}`);
    expect(err.message).toContain(`linux/${other}`);
    const single = await pushImage('paddock/foreign-single', [tarOf([{ path: 'a' }])], { architecture: other });
    const err2 = await refusal(store.pull(single.ref));
    expect(err2.message).toContain(`is for linux/${other}`);
    expectClean(store);
  });
});

describe('bad references and registries', () => {
  test('a missing tag or repository is not_found, naming it', async () => {
    await pushImage('paddock/present', [tarOf([{ path: 'a' }])]);
    const store = await openStore();
    const tag = await refusal(store.pull(`${registry.host}/paddock/present:nope`));
    expect(tag.kind).toBe('not_found');
    expect(tag.message).toContain(`image '${registry.host}/paddock/present:nope' not found`);
    expect(tag.message).toContain("manifest 'nope'");
    const repo = await refusal(store.pull(`${registry.host}/paddock/absent:latest`));
    expect(repo.kind).toBe('not_found');
    expect((await refusal(store.pull('Not A Reference'))).message).toContain("image reference 'Not A Reference' is invalid");
    expectClean(store);
  });

  test('a registry that is not there is unavailable', async () => {
    const store = await openStore();
    const err = await refusal(store.pull('127.0.0.1:1/paddock/x:1'));
    expect(err.kind).toBe('unavailable');
    expect(err.message).toContain('registry 127.0.0.1:1 could not be reached');
  });

  test('htpasswd (Basic) auth: refused without credentials, pulled with them', async () => {
    const secured = await startRegistry('htpasswd');
    try {
      const pushed = await pushImage('paddock/basic', [tarOf([{ path: 'b', body: 'basic' }])], { to: secured });
      const anonymous = await openStore();
      const err = await refusal(anonymous.pull(pushed.ref));
      expect(err.kind).toBe('invalid');
      expect(err.message).toContain(`image '${pushed.ref}': registry ${secured.host} requires a username and password`);
      const wrong = await openStore({ auth: { [secured.host]: { username: USER, password: 'nope' } } });
      expect((await refusal(wrong.pull(pushed.ref))).message).toContain('refused access');
      const store = await openStore({ auth: { [secured.host]: { username: USER, password: PASSWORD } } });
      const image = await store.pull(pushed.ref);
      expect(readFileSync(join(store.layerDirs(image)[0]!, 'b'), 'utf8')).toBe('basic');
    } finally {
      await secured.stop();
    }
  });

  test('token auth: anonymous tokens for public repositories, credentials for the rest', async () => {
    const secured = await startRegistry('token');
    try {
      const open = await pushImage('public/hello', [tarOf([{ path: 'pub', body: 'public' }])], { to: secured });
      const closed = await pushImage('private/hello', [tarOf([{ path: 'priv', body: 'private' }])], { to: secured });
      const anonymous = await openStore();
      const image = await anonymous.pull(open.ref);
      expect(readFileSync(join(anonymous.layerDirs(image)[0]!, 'pub'), 'utf8')).toBe('public');
      const err = await refusal(anonymous.pull(closed.ref));
      expect(err.kind).toBe('invalid');
      expect(err.message).toContain(`image '${closed.ref}': registry ${secured.host} refused access`);
      expect(err.message).toContain('no credentials are configured');
      const wrong = await openStore({ auth: { [secured.host]: { username: USER, password: 'nope' } } });
      expect((await refusal(wrong.pull(closed.ref))).message).toContain(`token service of registry ${secured.host} refused user '${USER}'`);
      const store = await openStore({ auth: { [secured.host]: { username: USER, password: PASSWORD } } });
      const priv = await store.pull(closed.ref);
      expect(readFileSync(join(store.layerDirs(priv)[0]!, 'priv'), 'utf8')).toBe('private');
    } finally {
      await secured.stop();
    }
  });
});

describe('damaged images', () => {
  test('a blob changed in the registry is a digest mismatch; nothing is kept', async () => {
    const pushed = await pushImage('paddock/tampered', [tarOf([{ path: 'data', body: 'x'.repeat(5000) }])]);
    const [layer] = (await registry.manifest('paddock/tampered', pushed.manifest.digest)).layers;
    // The gzip header's OS byte: the layer still unpacks to the same tar, only its digest differs.
    const file = registry.blobFile(layer!.digest);
    const bytes = readFileSync(file);
    bytes[9] = bytes[9] === 3 ? 255 : 3;
    writeFileSync(file, bytes);
    const store = await openStore();
    const err = await refusal(store.pull(pushed.ref));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain(`image '${pushed.ref}': layer ${layer!.digest} has digest sha256:`);
    expect(err.message).toContain(`not the ${layer!.digest} it was asked for`);
    expectClean(store);
  });

  test('a configuration whose diff_ids do not match the layers is refused', async () => {
    const pushed = await pushImage('paddock/diffid', [tarOf([{ path: 'd' }])], { diffIds: [`sha256:${'0'.repeat(64)}`] });
    const store = await openStore();
    const err = await refusal(store.pull(pushed.ref));
    expect(err.message).toContain('unpacks to diff_id sha256:');
    expect(err.message).toContain(`not the sha256:${'0'.repeat(64)} the image configuration gives`);
    expectClean(store);
  });

  test('a truncated layer is refused as truncated', async () => {
    const pushed = await pushImage('paddock/truncated', [tarOf([{ path: 'big', body: Buffer.alloc(200_000, 7) }, { path: 'more', body: 'm' }])]);
    truncateSync(registry.blobFile(pushed.layerDigests[0]!), 100);
    const store = await openStore();
    const err = await refusal(store.pull(pushed.ref));
    expect(err.kind).toBe('invalid');
    expect(err.message).toMatch(/truncated/);
    expect(err.message).toContain(pushed.layerDigests[0]);
    expectClean(store);
  });

  test('a pull cancelled midway leaves nothing', async () => {
    const pushed = await pushImage('paddock/cancel', [tarOf([{ path: 'big', body: randomBytes(3_000_000) }])]);
    const store = await openStore();
    const ac = new AbortController();
    const err = await refusal(store.pull(pushed.ref, { signal: ac.signal, onProgress: (p) => p.bytes > 0 && ac.abort() }));
    expect(err.kind).toBe('unavailable');
    expect(err.message).toContain('cancelled');
    expectClean(store);
  });
});

describe('hostile layers', () => {
  let store: ImageStore;
  let outside: string;
  beforeAll(async () => {
    store = await openStore();
    outside = mkdtempSync(join(work, 'outside-'));
  });

  const cases: [string, Parameters<typeof tarOf>[0], RegExp][] = [
    ['a path with ..', [{ path: '../../../../escaped', body: 'x' }], /entry '..\/..\/..\/..\/escaped' that has '..' in its path/],
    ['an absolute path', [{ path: '/abs', body: 'x' }], /entry '\/abs' that is an absolute path/],
    ['a character device', [{ path: 'dev/null', type: 'CharacterDevice' }], /entry 'dev\/null' that is a device node/],
    ['a block device', [{ path: 'dev/sda', type: 'BlockDevice' }], /entry 'dev\/sda' that is a device node/],
    ['an owner beyond the sandbox range', [{ path: 'f', body: 'x', uid: 70000 }], /entry 'f' that is owned by 70000:0, outside the ids 0-65535/],
    ['a hard link out of the layer', [{ path: 'h', type: 'Link', linkpath: '../../../etc/passwd' }], /entry 'h' that has '..' in its path/],
    ['a hard link to an absolute path', [{ path: 'h', type: 'Link', linkpath: '/etc/passwd' }], /entry 'h' that is an absolute path/],
  ];
  test.each(cases)('%s is refused by name, nothing written', async (_name, entries, message) => {
    const tar = join(work, `hostile-${Math.random()}.tar`);
    writeFileSync(tar, tarOf([{ path: 'ok', body: 'fine' }, ...entries]));
    const err = await refusal(store.importRootfsTar(tar, { reference: 'hostile:1' }));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain("image 'docker.io/library/hostile:1'");
    expect(err.message).toMatch(message);
    expect(existsSync(join(work, 'escaped'))).toBe(false);
    expectClean(store);
  });

  test('a symlink out of the layer and a file written through it: refused, nothing written outside', async () => {
    const layer = tarOf([
      { path: 'evil', type: 'SymbolicLink', linkpath: outside },
      { path: 'evil/pwned', body: 'gotcha' },
    ]);
    const pushed = await pushImage('paddock/hostile', [layer]);
    const err = await refusal(store.pull(pushed.ref));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain(`image '${pushed.ref}': layer ${pushed.layerDigests[0]} has entry 'evil/pwned' that would be written through symlink 'evil'`);
    expect(readdirSync(outside)).toEqual([]);
    // And as a whiteout, a hard link or an opaque marker through the same symlink.
    for (const path of ['evil/.wh.x', 'evil/.wh..wh..opq']) {
      const tar = join(work, `hostile-${Math.random()}.tar`);
      writeFileSync(tar, tarOf([{ path: 'evil', type: 'SymbolicLink', linkpath: outside }, { path }]));
      expect((await refusal(store.importRootfsTar(tar, { reference: 'hostile:2' }))).message).toContain('would be written through symlink');
    }
    expect(readdirSync(outside)).toEqual([]);
    expect(execFileSync('getfattr', ['-d', '-m', 'trusted', outside], { encoding: 'utf8' })).toBe('');
    expectClean(store);
  });

  test('a directory replaced by a symlink out of the layer: the symlink is kept, nothing outside touched', async () => {
    const before = statSync(outside).mtimeMs;
    const tar = join(work, 'dir-then-symlink.tar');
    writeFileSync(tar, tarOf([{ path: 'd/', type: 'Directory' }, { path: 'd', type: 'SymbolicLink', linkpath: outside }]));
    const s = await openStore();
    const image = await s.importRootfsTar(tar, { reference: 'dir-then-symlink:1' });
    expect(readlinkSync(join(s.layerDirs(image)[0]!, 'd'))).toBe(outside);
    expect(statSync(outside).mtimeMs).toBe(before);
  });

  test('a garbage layer is refused as corrupt', async () => {
    const tar = join(work, 'garbage.tar');
    writeFileSync(tar, Buffer.alloc(4096, 0x41));
    const err = await refusal(store.importRootfsTar(tar, { reference: 'garbage:1' }));
    expect(err.kind).toBe('invalid');
    expect(err.message).toMatch(/truncated or corrupt/);
    expectClean(store);
  });
});

describe('the store on disk', () => {
  test('open() removes what a crashed process left in tmp/, not what a live one is making', async () => {
    const store = await openStore();
    const dead = spawnSync('true').pid!;
    const live = execFileSync('sh', ['-c', 'sleep 30 >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' }).trim();
    try {
      mkdirSync(join(store.dir, 'tmp', `${dead}.layer-abc/fs/usr`), { recursive: true });
      writeFileSync(join(store.dir, 'tmp', `${dead}.layer-abc/fs/usr/half`), 'half a file');
      mkdirSync(join(store.dir, 'tmp', `${live}.layer-def`));
      await store.open();
      expect(readdirSync(join(store.dir, 'tmp'))).toEqual([`${live}.layer-def`]);
    } finally {
      process.kill(Number(live));
    }
  });

  test('pulls of one image at once, in one store and in two sharing a directory, keep one copy of each layer', async () => {
    const pushed = await pushImage('paddock/concurrent', [base, tarOf([{ path: 'c', body: randomBytes(500_000) }])]);
    const store = await openStore();
    const twin = new ImageStore({ dir: store.dir, idShift: SHIFT });
    stores.push(twin);
    await twin.open();
    const images = await Promise.all([store.pull(pushed.ref), store.pull(pushed.ref), twin.pull(pushed.ref)]);
    for (const image of images) expect(image.id).toBe(pushed.manifest.digest);
    expect(readFileSync(join(store.layerDirs(images[0])[0]!, 'c')).length).toBe(500_000);
    expectClean(store, pushed.diffIds);
  });

  test('a store made with another id shift is not opened with this one', async () => {
    const store = await openStore();
    const other = new ImageStore({ dir: store.dir, idShift: SHIFT + 65536 });
    const err = await refusal(other.open());
    expect(err.message).toContain(`holds layers owned from id ${SHIFT}`);
    await other.close();
  });

  test('gc removes the layers and images nobody uses, and keeps shared ones', async () => {
    const store = await openStore();
    const a = await store.pull((await pushImage('paddock/gc-a', [base, tarOf([{ path: 'a' }])])).ref);
    const b = await store.pull((await pushImage('paddock/gc-b', [base, tarOf([{ path: 'b' }])])).ref);
    const removed = await store.gc(new Set(a.diffIds));
    expect(removed).toEqual([b.diffIds[1]]);
    expect(await store.get(b.id)).toBeUndefined();
    expect(await store.get(a.id)).toEqual(a);
    for (const dir of store.layerDirs(a)) expect(existsSync(dir)).toBe(true);
    expect(existsSync(store.layerDirs(b)[0]!)).toBe(false);
    expect((await store.gc(new Set())).sort()).toEqual([...a.diffIds].sort());
    expect(await store.list()).toEqual([]);
    expectClean(store);
  });

  test('a tag pushed again moves to the new image', async () => {
    const store = await openStore();
    const first = await pushImage('paddock/moving', [tarOf([{ path: 'v', body: '1' }])]);
    const one = await store.pull(first.ref);
    const tag = first.ref.split(':').at(-1)!;
    const second = layout.image([tarOf([{ path: 'v', body: '2' }])], { tag: `${tag}-2` });
    execFileSync('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout.dir}:${tag}-2`, `docker://${first.ref}`]);
    const two = await store.pull(first.ref);
    expect(two.id).toBe(second.manifest.digest);
    expect((await store.get(one.id))?.references).toEqual([`${first.ref.split(':').slice(0, 2).join(':')}@${one.id}`]);
    expect((await store.get(first.ref))?.id).toBe(two.id);
  });
});

describe('local archives', () => {
  let pushedTag: string;
  let built: BuiltImage;

  beforeAll(() => {
    pushedTag = 'archived';
    built = layout.image([base, top], { tag: pushedTag });
  });

  test('an OCI image layout in a tar', async () => {
    const single = new OciLayout(join(work, 'single-layout'));
    const image = single.image([base, top], { tag: 'v1' });
    const tar = join(work, 'oci.tar');
    await create({ file: tar, cwd: single.dir }, ['oci-layout', 'index.json', 'blobs']);
    const store = await openStore();
    const imported = await store.importArchive(tar, { reference: 'example.com/archived:v1' });
    expect(imported.id).toBe(image.manifest.digest);
    expect(imported.references).toEqual(['example.com/archived:v1']);
    expect(imported.diffIds).toEqual(image.diffIds);
    expect(lstatSync(join(store.layerDirs(imported)[0]!, 'etc/gone')).isCharacterDevice()).toBe(true);
    expectClean(store, image.diffIds);
  });

  test('a docker save archive (written by skopeo), named by its RepoTags', async () => {
    const tar = join(work, 'docker.tar');
    execFileSync('skopeo', ['--insecure-policy', 'copy', '--quiet', `oci:${layout.dir}:${pushedTag}`, `docker-archive:${tar}:example.com/saved:v2`]);
    const store = await openStore();
    const progress: LayerProgress[] = [];
    const imported = await store.importArchive(tar, { onProgress: (p) => progress.push(p) });
    expect(imported.references).toEqual(['example.com/saved:v2']);
    expect(imported.diffIds).toEqual(built.diffIds);
    expect(progress.filter((p) => p.state === 'done')).toHaveLength(2);
    expect(readFileSync(join(store.layerDirs(imported)[1]!, 'etc/keep'), 'utf8')).toBe('kept\n');
    expect(lstatSync(join(store.layerDirs(imported)[1]!, 'bin/su')).mode & 0o7777).toBe(0o4755);
    expectClean(store, built.diffIds);
  });

  test('a plain rootfs tar is a one-layer image', async () => {
    const tar = join(work, 'rootfs.tar');
    writeFileSync(tar, base);
    const store = await openStore();
    const image = await store.importRootfsTar(tar, { reference: 'paddock.local/base:abc' });
    expect(image.references).toEqual(['paddock.local/base:abc']);
    expect(image.diffIds).toEqual([built.diffIds[0]]);
    expect(image.config.env).toEqual(['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin']);
    expect(await store.get('paddock.local/base:abc')).toEqual(image);
    expect(lstatSync(join(store.layerDirs(image)[0]!, 'home/user/notes')).uid).toBe(SHIFT + 1000);
  });

  test("a root entry written as '/' (as umoci writes it) is the layer's root", async () => {
    const tar = join(work, 'slash-root.tar');
    writeFileSync(tar, tarOf([{ path: '/', type: 'Directory', mode: 0o751, uid: 0 }, { path: 'opt/f', body: 'f' }]));
    const store = await openStore();
    const image = await store.importRootfsTar(tar, { reference: 'slash-root:1' });
    const root = lstatSync(store.layerDirs(image)[0]!);
    expect([root.uid, root.mode & 0o7777]).toEqual([SHIFT, 0o751]);
  });

  test('an archive of several images is refused, naming them, rather than one of them taken', async () => {
    const several = new OciLayout(join(work, 'several-layout'));
    several.image([base], { tag: 'one' });
    several.image([base, top], { tag: 'two' });
    const tar = join(work, 'several.tar');
    await create({ file: tar, cwd: several.dir }, ['oci-layout', 'index.json', 'blobs']);
    const store = await openStore();
    const err = await refusal(store.importArchive(tar));
    expect([err.kind, err.message]).toEqual(['invalid', `image archive '${tar}' holds 2 images (one, two); an archive of one image is imported`]);
    // docker save of two images: one saved by skopeo, its manifest.json listing it twice under two names.
    const one = join(work, 'one-saved.tar');
    execFileSync('skopeo', ['--insecure-policy', 'copy', '--quiet', `oci:${several.dir}:one`, `docker-archive:${one}:example.com/one:1`]);
    const unpacked = join(work, 'several-saved');
    mkdirSync(unpacked);
    await extract({ file: one, cwd: unpacked });
    const [entry] = JSON.parse(readFileSync(join(unpacked, 'manifest.json'), 'utf8')) as object[];
    writeFileSync(join(unpacked, 'manifest.json'), JSON.stringify([entry, { ...entry, RepoTags: ['example.com/two:2'] }]));
    const saved = join(work, 'several-saved.tar');
    await create({ file: saved, cwd: unpacked }, readdirSync(unpacked));
    expect((await refusal(store.importArchive(saved))).message).toBe(`image archive '${saved}' holds 2 images (example.com/one:1, example.com/two:2); an archive of one image is imported`);
    expectClean(store);
  });

  test('a file that is no image archive is refused by name', async () => {
    const tar = join(work, 'not-an-image.tar');
    writeFileSync(tar, base);
    const store = await openStore();
    const err = await refusal(store.importArchive(tar));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain(`image archive '${tar}' is neither an OCI image layout`);
    expectClean(store);
  });
});
