// envd's build tools (dist/sandbox/envd/tools.cjs), run as a template
// build runs them: the argv of envdToolCommand with its default root, in a
// chroot of a scratch image that has envd's sandbox directory bind-mounted
// read-only at /.paddock (in a mount namespace of its own, so nothing of it
// is seen outside the run). The tools read the image's /etc and write where
// the step says, as in a build container; the host's files are never in
// reach. Archives are made as the e2b SDK makes them (node-tar, the build
// context's files and directories, each entry alone), or block by block for
// the ones no honest SDK makes. The copy tool runs both ways a build may
// run it: in the image's chroot as in a build container, and on the host
// with --root (the runtime's way, into a new layer), where it resolves the
// image's paths itself and must never leave the image.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { create, Header, type HeaderData } from 'tar';
import { envdMountPoint, envdSandboxDir, envdToolCommand } from '../src/index.js';

const passwd = ['root:x:0:0:root:/root:/bin/bash', 'alice:x:1000:1000::/home/alice:/bin/bash', 'bob:x:1001:1050::/home/bob:/bin/sh', ''].join('\n');
const group = ['root:x:0:', 'shadow:x:42:', 'alice:x:1000:', 'staff:x:1050:', 'devs:x:2000:', ''].join('\n');

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

const roots: string[] = [];

/** A scratch image's root: the given files (path → content, or a directory for a path ending in '/'), a mount point for envd's directory, and a /tmp unless `noTmp`. */
function image(files: Record<string, string> = {}, { noTmp = false } = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'envd-tools-'));
  roots.push(root);
  chmodSync(root, 0o755);
  mkdirSync(join(root, envdMountPoint));
  if (!noTmp) {
    mkdirSync(join(root, 'tmp'));
    chmodSync(join(root, 'tmp'), 0o1777);
  }
  for (const [path, content] of Object.entries(files)) {
    const at = join(root, path);
    if (path.endsWith('/')) mkdirSync(at, { recursive: true });
    else {
      mkdirSync(dirname(at), { recursive: true });
      writeFileSync(at, content);
    }
  }
  return root;
}

/** An image with users and groups: root, alice (1000:1000), bob (1001, primary group staff 1050). */
const withUsers = (files: Record<string, string> = {}, opts = {}) => image({ 'etc/passwd': passwd, 'etc/group': group, ...files }, opts);

/** Whether copies run on the host with --root (the runtime's way) rather than in the image's chroot. */
let copyOnHost = false;
/** The host id of the image's id 0 when a copy runs on the host. */
let idShift = 0;

/**
 * Runs `tool` in the image at `root`, with an empty environment as a build
 * runs it. With `tmpfs`, the image's /tmp is a filesystem of its own, as
 * where rename cannot move what the copy unpacked there.
 */
function run(root: string, tool: 'copy' | 'user', args: string[], opts: { tmpfs?: boolean } = {}): Run {
  return tool === 'copy' && copyOnHost ? runOnHost(root, args, opts) : runInImage(root, tool, args, opts);
}

/** The copy tool on the host, told the image is at `root`; the archive (an image path in `args`) is passed as the host's path. */
function runOnHost(root: string, args: string[], { tmpfs = false } = {}): Run {
  const script = ['set -e', 'if [ -n "$2" ]; then mount -t tmpfs -o mode=1777 tmpfs "$1/tmp"; fi', 'shift 2', 'exec env -i "$@"'].join('\n');
  const hostArgs = args.map((a, i) => (args[i - 1] === '--archive' ? join(root, a) : a));
  const argv = envdToolCommand('copy', [...hostArgs, '--root', root, '--id-shift', String(idShift)], { root: envdSandboxDir });
  const res = spawnSync('unshare', ['--mount', '--', 'sh', '-c', script, 'sh', root, tmpfs ? 'tmpfs' : '', ...argv], { encoding: 'utf8', env: { PATH: process.env.PATH }, timeout: 30_000 });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

function runInImage(root: string, tool: 'copy' | 'user', args: string[], { tmpfs = false } = {}): Run {
  const script = [
    'set -e',
    'mount --bind -o ro "$1" "$2$3"',
    'if [ -n "$4" ]; then mount -t tmpfs -o mode=1777 tmpfs "$2/tmp"; fi',
    'root=$2',
    'shift 4',
    'exec env -i "$(command -v chroot)" "$root" "$@"',
  ].join('\n');
  const argv = envdToolCommand(tool, args);
  const res = spawnSync('unshare', ['--mount', '--', 'sh', '-c', script, 'sh', envdSandboxDir, root, envdMountPoint, tmpfs ? 'tmpfs' : '', ...argv], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
    timeout: 30_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** Runs a tool that has to succeed, and gives its stdout. */
function ok(root: string, tool: 'copy' | 'user', args: string[], opts = {}): string {
  const res = run(root, tool, args, opts);
  if (res.status !== 0) throw new Error(`${tool} ${args.join(' ')} exited ${res.status}: ${res.stderr}`);
  expect(res.stderr).toBe('');
  return res.stdout;
}

/**
 * A build context: files (path → content; '/' at the end for a directory;
 * `-> target` for a symlink), with modes where given.
 */
function context(entries: Record<string, string>, modes: Record<string, number> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'envd-tools-ctx-'));
  roots.push(dir);
  for (const [path, content] of Object.entries(entries)) {
    const at = join(dir, path);
    mkdirSync(dirname(at), { recursive: true });
    if (path.endsWith('/')) mkdirSync(at, { recursive: true });
    else if (content.startsWith('-> ')) symlinkSync(content.slice(3), at);
    else writeFileSync(at, content);
  }
  for (const [path, mode] of Object.entries(modes)) chmodSync(join(dir, path), mode);
  return dir;
}

/** Every file and directory under `dir`, relative, sorted: what the SDK lists for a COPY of `.`. */
function listing(dir: string, under = ''): string[] {
  return readdirSync(join(dir, under), { withFileTypes: true }).flatMap((e) => {
    const rel = under ? `${under}/${e.name}` : e.name;
    return e.isDirectory() ? [rel, ...listing(dir, rel)] : [rel];
  });
}

/** The archive the SDK uploads for `ctx`, written into the image at /ctx.tar; returns its path in the image. */
async function sdkArchive(root: string, ctx: string, { gzip = true, paths = listing(ctx).sort() } = {}): Promise<string> {
  await create({ gzip, cwd: ctx, noDirRecurse: true, file: join(root, 'ctx.tar') }, paths);
  return '/ctx.tar';
}

/** An archive of the given headers (with `body` for a file), block by block, at /ctx.tar in the image. */
function rawArchive(root: string, entries: (HeaderData & { body?: string })[]): string {
  const blocks: Buffer[] = [];
  for (const { body = '', ...data } of entries) {
    const h = new Header({ mode: 0o644, uid: 0, gid: 0, mtime: new Date(), size: Buffer.byteLength(body), ...data });
    h.encode();
    blocks.push(h.block!);
    if (body) {
      const b = Buffer.alloc(Math.ceil(Buffer.byteLength(body) / 512) * 512);
      b.write(body);
      blocks.push(b);
    }
  }
  blocks.push(Buffer.alloc(1024));
  writeFileSync(join(root, 'ctx.tar'), Buffer.concat(blocks));
  return '/ctx.tar';
}

const read = (root: string, path: string) => readFileSync(join(root, path), 'utf8');
const modeOf = (root: string, path: string) => lstatSync(join(root, path)).mode & 0o7777;
/** The owner in the image's ids (a copy on the host gives host ids from idShift). */
const ownerOf = (root: string, path: string) => {
  const st = lstatSync(join(root, path));
  const image = (id: number) => (copyOnHost && id >= idShift ? id - idShift : id);
  return `${image(st.uid)}:${image(st.gid)}`;
};
/** What the copy left in the image's /tmp: nothing, when it cleans up. */
const tmpLeft = (root: string) => readdirSync(join(root, 'tmp'));

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('these tests run the tools in a chroot of a mount namespace, which takes root');
  if (!existsSync(join(envdSandboxDir, 'envd', 'tools.cjs'))) throw new Error('envd is not built: run the envd build');
});

afterEach(() => {
  for (const dir of roots.splice(0)) rmSync(dir, { recursive: true, force: true });
});

test('envdToolCommand runs tools.cjs with the node and loader of the sandbox directory, as envdCommand runs envd', () => {
  const argv = envdToolCommand('user', ['alice'], { root: '/x' });
  expect(argv.slice(1, 5)).toEqual(['--library-path', '/x/lib', '--inhibit-cache', '/x/bin/node']);
  expect(argv[0]).toMatch(/^\/x\/lib\/ld-/);
  expect(argv.slice(5)).toEqual(['/x/envd/tools.cjs', 'user', 'alice']);
});

describe.each([
  ['in the image, as in a build container', false],
  ['on the host with --root, as the runtime runs it', true],
])('copy %s', (_, onHost) => {
  beforeAll(() => {
    copyOnHost = onHost;
  });
  afterAll(() => {
    copyOnHost = false;
  });

  describe.each([
    ['a gzip archive, unpacked on the image filesystem', { gzip: true, tmpfs: false }],
    ['a plain archive, unpacked on a /tmp of its own', { gzip: false, tmpfs: true }],
  ])('of %s', (_, { gzip, tmpfs }) => {
    test('a file to an exact path, creating its parents with mode 0755', async () => {
      const root = withUsers();
      const archive = await sdkArchive(root, context({ 'config.json': '{"a":1}' }, { 'config.json': 0o600 }), { gzip });
      ok(root, 'copy', ['--archive', archive, '--source', 'config.json', '--dest', '/etc/app/conf.d/app.json'], { tmpfs });
      expect(read(root, 'etc/app/conf.d/app.json')).toBe('{"a":1}');
      expect(modeOf(root, 'etc/app/conf.d/app.json')).toBe(0o600);
      expect(modeOf(root, 'etc/app')).toBe(0o755);
      expect(modeOf(root, 'etc/app/conf.d')).toBe(0o755);
      expect(ownerOf(root, 'etc/app/conf.d/app.json')).toBe('0:0');
      expect(tmpLeft(root)).toEqual([]);
    });

    test('a directory merged into one that exists: its files replaced, its others kept, its own owner and mode kept', async () => {
      const root = withUsers({ 'srv/keep.txt': 'kept', 'srv/lib/old.py': 'old', 'srv/main.py': 'before' });
      chmodSync(join(root, 'srv'), 0o711);
      const ctx = context({ 'app/main.py': 'after', 'app/lib/new.py': 'new', 'app/bin/run': '#!/bin/sh' }, { 'app/bin/run': 0o755, 'app/lib': 0o750 });
      const archive = await sdkArchive(root, ctx, { gzip });
      ok(root, 'copy', ['--archive', archive, '--source', 'app/', '--dest', '/srv', '--owner', 'alice'], { tmpfs });
      expect(read(root, 'srv/main.py')).toBe('after');
      expect(read(root, 'srv/keep.txt')).toBe('kept');
      expect(read(root, 'srv/lib/old.py')).toBe('old');
      expect(read(root, 'srv/lib/new.py')).toBe('new');
      expect(modeOf(root, 'srv/bin/run')).toBe(0o755);
      // Existing directories are merged into, not taken over.
      expect(ownerOf(root, 'srv')).toBe('0:0');
      expect(modeOf(root, 'srv')).toBe(0o711);
      expect(ownerOf(root, 'srv/lib')).toBe('0:0');
      // What the copy brought is alice's, the directories it created with their archive modes.
      expect(ownerOf(root, 'srv/main.py')).toBe('1000:1000');
      expect(ownerOf(root, 'srv/bin')).toBe('1000:1000');
      expect(ownerOf(root, 'srv/bin/run')).toBe('1000:1000');
      // with the archive's modification times (whole seconds in a tar header)
      const seconds = (path: string) => Math.trunc(lstatSync(path).mtimeMs / 1000);
      expect(seconds(join(root, 'srv/bin/run'))).toBe(seconds(join(ctx, 'app/bin/run')));
      expect(tmpLeft(root)).toEqual([]);
    });

    test('a symlink is kept as a symlink; --mode changes files and directories, never what a symlink points to', async () => {
      const root = withUsers({ 'etc/hostname': 'host' });
      chmodSync(join(root, 'etc/hostname'), 0o644);
      const ctx = context({ 'app/run.sh': 'echo', 'app/data/': '', 'app/host': '-> /etc/hostname', 'app/run': '-> run.sh' });
      const archive = await sdkArchive(root, ctx, { gzip });
      ok(root, 'copy', ['--archive', archive, '--source', 'app', '--dest', '/app', '--mode', '0750', '--owner', '1001:2000'], { tmpfs });
      expect(readlinkSync(join(root, 'app/host'))).toBe('/etc/hostname');
      expect(readlinkSync(join(root, 'app/run'))).toBe('run.sh');
      expect(ownerOf(root, 'app/host')).toBe('1001:2000');
      expect(modeOf(root, 'app/run.sh')).toBe(0o750);
      expect(modeOf(root, 'app/data')).toBe(0o750);
      expect(modeOf(root, 'app')).toBe(0o750);
      expect(ownerOf(root, 'app')).toBe('1001:2000');
      expect(modeOf(root, 'etc/hostname')).toBe(0o644);
      expect(ownerOf(root, 'etc/hostname')).toBe('0:0');
    });
  });

  test('a file into a directory: a dest ending in / is created; one that exists is used as it is', async () => {
    const root = withUsers({ 'opt/': '' });
    const archive = await sdkArchive(root, context({ 'file.txt': 'x', 'package.json': '{}' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'package.json', '--dest', '/app/', '--user', 'alice']);
    expect(read(root, 'app/package.json')).toBe('{}');
    // A directory the copy created for its dest is the owner's.
    expect(ownerOf(root, 'app')).toBe('1000:1000');
    expect(modeOf(root, 'app')).toBe(0o755);
    ok(root, 'copy', ['--archive', archive, '--source', 'file.txt', '--dest', '/opt']);
    expect(read(root, 'opt/file.txt')).toBe('x');
  });

  test('a nested source: the contents of src/app/ become the dest', async () => {
    const root = withUsers();
    const archive = await sdkArchive(root, context({ 'src/app/a.ts': 'a', 'src/app/sub/b.ts': 'b', 'src/other.ts': 'o' }));
    ok(root, 'copy', ['--archive', archive, '--source=src/app/', '--dest=/code']);
    expect(listing(join(root, 'code')).sort()).toEqual(['a.ts', 'sub', 'sub/b.ts']);
  });

  test("the whole context ('.'), and an archive with a root entry as GNU tar makes it", async () => {
    const root = withUsers();
    const ctx = context({ 'a.txt': 'a', 'd/b.txt': 'b' });
    const archive = await sdkArchive(root, ctx, { paths: ['.', 'a.txt', 'd', 'd/b.txt'] });
    ok(root, 'copy', ['--archive', archive, '--source', '.', '--dest', '/w']);
    expect(listing(join(root, 'w')).sort()).toEqual(['a.txt', 'd', 'd/b.txt']);
  });

  test('a file or symlink at the destination is replaced, not written through', async () => {
    const root = withUsers({ 'etc/shown': 'original', 'app/': '' });
    symlinkSync('/etc/shown', join(root, 'app/config'));
    const archive = await sdkArchive(root, context({ 'config': 'new' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'config', '--dest', '/app/config']);
    expect(lstatSync(join(root, 'app/config')).isFile()).toBe(true);
    expect(read(root, 'app/config')).toBe('new');
    expect(read(root, 'etc/shown')).toBe('original');
  });

  test('a file cannot replace a directory', async () => {
    const root = withUsers({ 'srv/cache/x': '' });
    const archive = await sdkArchive(root, context({ 'app/cache': 'file' }));
    const res = run(root, 'copy', ['--archive', archive, '--source', 'app', '--dest', '/srv']);
    expect(res).toMatchObject({ status: 1, stderr: "copy: '/srv/cache' is a directory; a file cannot replace it\n" });
  });

  test('a relative dest is in --workdir, else in the home of --user, else in /', async () => {
    const root = withUsers({ 'home/alice/': '' });
    const archive = await sdkArchive(root, context({ 'f.txt': 'f' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', 'sub/', '--workdir', '/work', '--user', 'alice']);
    expect(read(root, 'work/sub/f.txt')).toBe('f');
    ok(root, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', '.', '--user', 'alice']);
    expect(ownerOf(root, 'home/alice/f.txt')).toBe('1000:1000');
    ok(root, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest=-g.txt']);
    expect(read(root, '-g.txt')).toBe('f');
  });

  test.each([
    ['a name: the user and its primary group', 'bob', '1001:1050'],
    ['name:group', 'alice:devs', '1000:2000'],
    ['uid:gid', '4321:8765', '4321:8765'],
    ['a uid the image does not list: the gid of the same number', '4321', '4321:4321'],
    ['a listed uid: its primary group', '1001', '1001:1050'],
    ['root, named', 'root:root', '0:0'],
  ])('--owner as %s', async (_, owner, expected) => {
    const root = withUsers();
    const archive = await sdkArchive(root, context({ 'd/f': 'f' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'd', '--dest', '/x/y', '--owner', owner]);
    // The owner is given to what was copied and to the directories made for it.
    for (const path of ['x', 'x/y', 'x/y/f']) expect(ownerOf(root, path)).toBe(expected);
  });

  test('--user without --owner owns the copy; neither, root does', async () => {
    const root = withUsers();
    const archive = await sdkArchive(root, context({ 'f': 'f' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/by-bob', '--user', 'bob']);
    expect(ownerOf(root, 'by-bob')).toBe('1001:1050');
    ok(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/by-root']);
    expect(ownerOf(root, 'by-root')).toBe('0:0');
  });

  test('an image without /tmp (scratch) gets one for the copy only', async () => {
    const root = image({}, { noTmp: true });
    const archive = await sdkArchive(root, context({ 'f': 'f' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/f']);
    expect(read(root, 'f')).toBe('f');
    expect(existsSync(join(root, 'tmp'))).toBe(false);
  });

  test.each([
    ['an unknown user', ['--owner', 'carol'], "copy: user 'carol' is not in /etc/passwd"],
    ['an unknown group', ['--owner', 'alice:nobody'], "copy: group 'nobody' is not in /etc/group"],
    ['a malformed owner', ['--owner', 'a:b:c'], "copy: owner 'a:b:c' is not user, user:group, uid or uid:gid"],
    ['an unknown --user', ['--user', 'carol'], "copy: user 'carol' is not in /etc/passwd"],
    ['a mode that is not octal', ['--mode', '0798'], "copy: mode '0798' is not an octal mode like 0755"],
  ])('%s is an error that names it, and nothing is copied', async (_, extra, message) => {
    const root = withUsers();
    const archive = await sdkArchive(root, context({ 'f': 'f' }));
    expect(run(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/out/f', ...extra])).toMatchObject({ status: 1, stderr: `${message}\n` });
    expect(existsSync(join(root, 'out'))).toBe(false);
  });

  test('a source missing from the archive is an error naming it', async () => {
    const root = withUsers();
    const archive = await sdkArchive(root, context({ 'f': 'f' }));
    expect(run(root, 'copy', ['--archive', archive, '--source', 'app/', '--dest', '/app'])).toMatchObject({
      status: 1,
      stderr: "copy: source 'app/' is not in the archive\n",
    });
    expect(run(root, 'copy', ['--archive', archive, '--source', '../f', '--dest', '/app'])).toMatchObject({
      status: 1,
      stderr: "copy: source '../f' is outside the build context\n",
    });
    expect(tmpLeft(root)).toEqual([]);
  });

  test('a file that is not an archive is an error naming it', () => {
    const root = withUsers({ 'ctx.tar': 'not a tar archive at all, just some text that fills less than a block' });
    const res = run(root, 'copy', ['--archive', '/ctx.tar', '--source', '.', '--dest', '/app']);
    expect(res.status).toBe(1);
    expect(res.stderr).toMatch(/^copy: archive '(.*\/)?ctx\.tar': .+\n$/);
    expect(existsSync(join(root, 'app'))).toBe(false);
  });

  test.each([
    ['a path with ..', [{ path: '../escaped', body: 'x' }], "archive entry '../escaped' leaves the archive ('..')"],
    ['an absolute path', [{ path: '/etc/evil', body: 'x' }], "archive entry '/etc/evil' is an absolute path"],
    ['a device', [{ path: 'app/null', type: 'CharacterDevice' as const, devmaj: 1, devmin: 3 }], "archive entry 'app/null' is a CharacterDevice; only files, directories and symlinks are copied"],
    ['a FIFO', [{ path: 'app/pipe', type: 'FIFO' as const }], "archive entry 'app/pipe' is a FIFO; only files, directories and symlinks are copied"],
    [
      'a file under a symlink of the archive',
      [
        { path: 'app/etc', type: 'SymbolicLink' as const, linkpath: '/etc' },
        { path: 'app/etc/passwd', body: 'evil::0:0::/:/bin/sh\n' },
      ],
      "archive entry 'app/etc/passwd' is under the symlink 'app/etc'",
    ],
    [
      'a hard link out of the archive',
      [{ path: 'app/pw', type: 'Link' as const, linkpath: 'etc/passwd' }],
      "archive entry 'app/pw' is a hard link to 'etc/passwd', which is not a file before it in the archive",
    ],
  ])('an archive with %s is refused with the entry named, and nothing is written', (_, bad, message) => {
    const root = withUsers();
    const archive = rawArchive(root, [{ path: 'app/', type: 'Directory', mode: 0o755 }, { path: 'app/ok.txt', body: 'fine' }, ...bad, { path: 'app/last.txt', body: 'last' }]);
    const res = run(root, 'copy', ['--archive', archive, '--source', 'app', '--dest', '/out']);
    expect(res).toMatchObject({ status: 1, stderr: `copy: ${message}\n` });
    expect(existsSync(join(root, 'out'))).toBe(false);
    expect(existsSync(join(root, 'escaped'))).toBe(false);
    expect(existsSync(join(root, 'etc/evil'))).toBe(false);
    expect(read(root, 'etc/passwd')).toBe(passwd);
    expect(tmpLeft(root)).toEqual([]);
  });

  test('an archive that puts a directory where it had a symlink writes into that directory, never through the symlink', () => {
    const root = withUsers();
    const archive = rawArchive(root, [
      { path: 'app/etc', type: 'SymbolicLink', linkpath: '/etc' },
      { path: 'app/etc/', type: 'Directory', mode: 0o755 },
      { path: 'app/etc/passwd', body: 'evil::0:0::/:/bin/sh\n' },
    ]);
    ok(root, 'copy', ['--archive', archive, '--source', 'app', '--dest', '/out']);
    expect(lstatSync(join(root, 'out/etc')).isDirectory()).toBe(true);
    expect(read(root, 'out/etc/passwd')).toBe('evil::0:0::/:/bin/sh\n');
    expect(read(root, 'etc/passwd')).toBe(passwd);
  });

  test('a file of zeros, which compresses a thousandfold and more, is copied whole', async () => {
    const root = withUsers();
    const ctx = context({});
    writeFileSync(join(ctx, 'zeros.img'), Buffer.alloc(32 << 20));
    const archive = await sdkArchive(root, ctx);
    expect(statSync(join(root, 'ctx.tar')).size).toBeLessThan((32 << 20) / 1000);
    ok(root, 'copy', ['--archive', archive, '--source', 'zeros.img', '--dest', '/zeros.img']);
    expect(statSync(join(root, 'zeros.img')).size).toBe(32 << 20);
  });

  test('a hard link to a file of the archive is copied', () => {
    const root = withUsers();
    const archive = rawArchive(root, [
      { path: 'app/a.txt', body: 'same' },
      { path: 'app/b.txt', type: 'Link', linkpath: 'app/a.txt' },
    ]);
    ok(root, 'copy', ['--archive', archive, '--source', 'app', '--dest', '/out']);
    expect(read(root, 'out/b.txt')).toBe('same');
    expect(statSync(join(root, 'out/b.txt')).ino).toBe(statSync(join(root, 'out/a.txt')).ino);
  });
});

describe('copy on the host with --root', () => {
  beforeAll(() => {
    copyOnHost = true;
  });
  afterAll(() => {
    copyOnHost = false;
    idShift = 0;
  });

  test("the image's symlinks, absolute or climbing with '..', lead within the image, never to the host's files", async () => {
    const root = withUsers({ 'etc/motd': 'image motd' });
    symlinkSync('/etc', join(root, 'opt'));
    symlinkSync('../../../../../../../../etc', join(root, 'srv'));
    symlinkSync('/../../etc/motd', join(root, 'motd'));
    const archive = await sdkArchive(root, context({ 'f.txt': 'f', 'd/g.txt': 'g' }));
    const marker = `paddock-copy-test-${process.pid}`;
    ok(root, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', `/opt/${marker}`]);
    ok(root, 'copy', ['--archive', archive, '--source', 'd', '--dest', `/srv/${marker}.d`]);
    // a file at a symlink is replaced, not written through
    ok(root, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', '/motd']);
    expect(read(root, `etc/${marker}`)).toBe('f');
    expect(read(root, `etc/${marker}.d/g.txt`)).toBe('g');
    expect(lstatSync(join(root, 'motd')).isFile()).toBe(true);
    expect(read(root, 'etc/motd')).toBe('image motd');
    for (const p of [`/etc/${marker}`, `/etc/${marker}.d`]) expect(existsSync(p)).toBe(false);
  });

  test("the image's account files are read through its own symlinks; one that is not a file is an error, not a wait", async () => {
    const root = image({ 'etc/accounts/passwd': passwd, 'etc/group': group });
    symlinkSync('/etc/accounts/passwd', join(root, 'etc/passwd'));
    const archive = await sdkArchive(root, context({ 'f': 'f' }));
    ok(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/f', '--owner', 'bob']);
    expect(ownerOf(root, 'f')).toBe('1001:1050');
    rmSync(join(root, 'etc/passwd'));
    expect(spawnSync('mkfifo', [join(root, 'etc/passwd')]).status).toBe(0);
    expect(run(root, 'copy', ['--archive', archive, '--source', 'f', '--dest', '/g', '--owner', 'bob'])).toMatchObject({ status: 1, stderr: "copy: '/etc/passwd' is not a file\n" });
  });

  test("owners are the image's ids moved to the sandboxes' range at --id-shift", async () => {
    idShift = 100_000;
    try {
      const root = withUsers();
      const archive = await sdkArchive(root, context({ 'd/f': 'f' }));
      ok(root, 'copy', ['--archive', archive, '--source', 'd', '--dest', '/x/y', '--owner', 'alice']);
      for (const path of ['x', 'x/y', 'x/y/f']) expect(lstatSync(join(root, path))).toMatchObject({ uid: 101_000, gid: 101_000 });
      ok(root, 'copy', ['--archive', archive, '--source', 'd', '--dest', '/z']);
      expect(lstatSync(join(root, 'z/f'))).toMatchObject({ uid: 100_000, gid: 100_000 });
    } finally {
      idShift = 0;
    }
  });

  test('--max-bytes bounds what the archive may unpack to, and nothing is copied past it', async () => {
    const root = withUsers();
    const ctx = context({});
    writeFileSync(join(ctx, 'zeros.img'), Buffer.alloc(4 << 20));
    const archive = await sdkArchive(root, ctx);
    expect(run(root, 'copy', ['--archive', archive, '--source', '.', '--dest', '/out', '--max-bytes', String(1 << 20)])).toMatchObject({
      status: 1,
      stderr: `copy: the archive's files hold more than ${1 << 20} bytes, the most this copy may write\n`,
    });
    expect(existsSync(join(root, 'out'))).toBe(false);
    expect(tmpLeft(root)).toEqual([]);
  });
});

describe('copy on the host from the archive kept unpacked (--unpacked)', () => {
  beforeAll(() => {
    copyOnHost = true;
  });
  afterAll(() => {
    copyOnHost = false;
  });

  /** Where the runtime's caller keeps archives unpacked: a host directory no image sees, with its scratch directory. */
  function keep(): { dir: string; args: string[] } {
    const host = mkdtempSync(join(tmpdir(), 'envd-tools-kept-'));
    roots.push(host);
    mkdirSync(join(host, 'scratch'));
    const dir = join(host, 'kept');
    return { dir, args: ['--unpacked', dir, '--unpack-scratch', join(host, 'scratch')] };
  }

  /** Everything of the tree at `dir` that a copy decides: types, modes, owners, files' times, link targets, hard links, contents. */
  function describeTree(dir: string): string[] {
    const inodes = new Map<number, string>();
    return [
      `. ${(lstatSync(dir).mode & 0o7777).toString(8)}`,
      ...listing(dir)
        .sort()
        .map((rel) => {
          const st = lstatSync(join(dir, rel));
          const kind = st.isSymbolicLink() ? `-> ${readlinkSync(join(dir, rel))}` : st.isDirectory() ? 'dir' : `file ${readFileSync(join(dir, rel), 'utf8')}`;
          const linked = st.isFile() && st.nlink > 1 ? (inodes.get(st.ino) ?? (inodes.set(st.ino, rel), '')) : '';
          // A directory's times are when it was unpacked; a file's are the archive's.
          const times = st.isFile() ? ` ${st.mtimeMs}` : '';
          return `${rel} ${kind} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}${times}${linked ? ` =${linked}` : ''}`;
        }),
    ];
  }

  test('places what unpacking the archive places: files, modes, times, symlinks, hard links, the root of a copy of everything', async () => {
    const entries: (HeaderData & { body?: string })[] = [
      { path: './', type: 'Directory', mode: 0o750, mtime: new Date('2020-01-02T03:04:05Z') },
      { path: 'app', type: 'Directory', mode: 0o711, mtime: new Date('2021-01-02T03:04:05Z') },
      { path: 'app/a.txt', body: 'a', mode: 0o640, mtime: new Date('2022-01-02T03:04:05Z') },
      { path: 'app/b.txt', type: 'Link', linkpath: 'app/a.txt' },
      { path: 'app/run.sh', body: '#!/bin/sh', mode: 0o4755, mtime: new Date('2023-01-02T03:04:05Z') },
      { path: 'app/link', type: 'SymbolicLink', linkpath: '../elsewhere' },
    ];
    const plain = withUsers();
    ok(plain, 'copy', ['--archive', rawArchive(plain, entries), '--source', '.', '--dest', '/out', '--owner', 'bob']);
    const kept = keep();
    const cached = withUsers();
    const archive = rawArchive(cached, entries);
    ok(cached, 'copy', ['--archive', archive, '--source', '.', '--dest', '/out', '--owner', 'bob', ...kept.args]);
    expect(describeTree(join(cached, 'out'))).toEqual(describeTree(join(plain, 'out')));
    // And again from what was kept, into another image.
    const again = withUsers();
    rawArchive(again, entries);
    ok(again, 'copy', ['--archive', archive, '--source', '.', '--dest', '/out', '--owner', 'bob', ...kept.args]);
    expect(describeTree(join(again, 'out'))).toEqual(describeTree(join(plain, 'out')));
    expect(tmpLeft(again)).toEqual([]);
    expect(readdirSync(join(kept.dir, '..', 'scratch'))).toEqual([]);
  });

  test('the first copy keeps the archive unpacked and later ones copy from there, still bounded by --max-bytes', async () => {
    const kept = keep();
    const first = withUsers();
    const archive = await sdkArchive(first, context({ 'f.txt': 'first' }));
    ok(first, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', '/f.txt', ...kept.args]);
    expect(readFileSync(join(kept.dir, 'files/f.txt'), 'utf8')).toBe('first');
    // The archive is no longer read: what was kept is what is copied.
    const second = withUsers();
    await sdkArchive(second, context({ 'f.txt': 'other' }));
    ok(second, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', '/f.txt', ...kept.args]);
    expect(read(second, 'f.txt')).toBe('first');
    expect(run(second, 'copy', ['--archive', archive, '--source', 'f.txt', '--dest', '/g.txt', '--max-bytes', '2', ...kept.args])).toMatchObject({
      status: 1,
      stderr: "copy: the archive's files hold more than 2 bytes, the most this copy may write\n",
    });
    expect(existsSync(join(second, 'g.txt'))).toBe(false);
  });

  test('an archive refused as it is unpacked is not kept', async () => {
    const kept = keep();
    const root = withUsers();
    const archive = rawArchive(root, [{ path: '../escape', body: 'x' }]);
    expect(run(root, 'copy', ['--archive', archive, '--source', '.', '--dest', '/out', ...kept.args])).toMatchObject({ status: 1, stderr: expect.stringContaining("leaves the archive ('..')") });
    expect(existsSync(kept.dir)).toBe(false);
    expect(readdirSync(join(kept.dir, '..', 'scratch'))).toEqual([]);
  });
});

describe('user', () => {
  test('an existing user: its uid, gid and home, and nothing changed', () => {
    const root = withUsers();
    expect(ok(root, 'user', ['bob'])).toBe('1001 1050 /home/bob\n');
    expect(read(root, 'etc/passwd')).toBe(passwd);
    expect(read(root, 'etc/group')).toBe(group);
  });

  test('root where the image lists no users', () => {
    const root = image({ 'root/': '' });
    expect(ok(root, 'user', ['root'])).toBe('0 0 /root\n');
    expect(existsSync(join(root, 'etc/passwd'))).toBe(false);
  });

  test("a new user on a Debian-like image: as Debian's useradd -m makes it", () => {
    const root = withUsers({
      'etc/shadow': 'root:*:19000:0:99999:7:::\nalice:!:19000:0:99999:7:::',
      'etc/gshadow': 'root:*::\n',
      'etc/skel/.bashrc': '# bashrc',
      'etc/skel/.config/app.conf': 'x',
      'bin/bash': '',
    });
    chmodSync(join(root, 'etc/shadow'), 0o640);
    for (const f of ['etc/shadow', 'etc/gshadow']) {
      chmodSync(join(root, f), 0o640);
      // owned by the shadow group, as Debian has them
      spawnSync('chown', ['0:42', join(root, f)]);
    }
    const days = Math.floor(Date.now() / 86_400_000);
    // 1001 is the highest uid in use, and gid 1002 is free.
    expect(ok(root, 'user', ['carol'])).toBe('1002 1002 /home/carol\n');
    expect(read(root, 'etc/passwd')).toBe(`${passwd}carol:x:1002:1002::/home/carol:/bin/bash\n`);
    expect(read(root, 'etc/group')).toBe(`${group}carol:x:1002:\n`);
    expect(read(root, 'etc/shadow')).toMatch(new RegExp(`^root:\\*:19000:0:99999:7:::\\nalice:!:19000:0:99999:7:::\\ncarol:!:(${days}|${days + 1}):0:99999:7:::\\n$`));
    expect(read(root, 'etc/gshadow')).toBe('root:*::\ncarol:!::\n');
    expect(modeOf(root, 'etc/shadow')).toBe(0o640);
    expect(ownerOf(root, 'etc/shadow')).toBe('0:42');
    expect(modeOf(root, 'etc/passwd')).toBe(0o644);
    expect(modeOf(root, 'home/carol')).toBe(0o755);
    expect(ownerOf(root, 'home/carol')).toBe('1002:1002');
    expect(read(root, 'home/carol/.bashrc')).toBe('# bashrc');
    for (const path of ['.bashrc', '.config', '.config/app.conf']) expect(ownerOf(root, `home/carol/${path}`)).toBe('1002:1002');
    expect(read(root, 'etc/skel/.bashrc')).toBe('# bashrc');
    expect(readdirSync(join(root, 'etc')).sort()).toEqual(['group', 'gshadow', 'passwd', 'shadow', 'skel']);
    // A second USER of the same name finds it.
    expect(ok(root, 'user', ['carol'])).toBe('1002 1002 /home/carol\n');
  });

  test('a new user on a scratch image: passwd and group made, no shadow, /bin/sh', () => {
    const root = image();
    expect(ok(root, 'user', ['app'])).toBe('1000 1000 /home/app\n');
    expect(read(root, 'etc/passwd')).toBe('app:x:1000:1000::/home/app:/bin/sh\n');
    expect(read(root, 'etc/group')).toBe('app:x:1000:\n');
    expect(existsSync(join(root, 'etc/shadow'))).toBe(false);
    expect(ownerOf(root, 'home/app')).toBe('1000:1000');
    expect(modeOf(root, 'home')).toBe(0o755);
  });

  test('a group of the same name is taken as it is; a taken gid makes the group the next free one', () => {
    const root = withUsers();
    expect(ok(root, 'user', ['devs'])).toBe('1002 2000 /home/devs\n');
    expect(read(root, 'etc/group')).toBe(group);
    const other = image({ 'etc/passwd': 'root:x:0:0::/root:/bin/sh\n', 'etc/group': 'root:x:0:\nusers:x:1000:\n' });
    expect(ok(other, 'user', ['dan'])).toBe('1000 1001 /home/dan\n');
    expect(read(other, 'etc/group')).toBe('root:x:0:\nusers:x:1000:\ndan:x:1001:\n');
  });

  test('a home that exists is left as it is', () => {
    const root = withUsers({ 'home/erin/notes': 'mine', 'etc/skel/.profile': 'p' });
    chmodSync(join(root, 'home/erin'), 0o700);
    expect(ok(root, 'user', ['erin'])).toBe('1002 1002 /home/erin\n');
    expect(ownerOf(root, 'home/erin')).toBe('0:0');
    expect(modeOf(root, 'home/erin')).toBe(0o700);
    expect(existsSync(join(root, 'home/erin/.profile'))).toBe(false);
  });

  test.each(['Alice', '1user', 'a:b', 'x'.repeat(33), ''])('a bad name (%p) is an error naming it, and nothing is written', (name) => {
    const root = withUsers();
    const res = run(root, 'user', [name]);
    expect(res.status).toBe(1);
    expect(res.stderr).toBe(`user: '${name}' is not a valid user name: at most 32 lower-case letters, digits, '_' and '-', starting with a letter or '_'\n`);
    expect(read(root, 'etc/passwd')).toBe(passwd);
    expect(existsSync(join(root, 'home'))).toBe(false);
  });
});

describe('step-process', () => {
  /** The tool on the host, told the image is at `root`, as the runtime asks it before a build step's container starts. */
  const stepProcess = (root: string, args: string[]) => {
    const [cmd, ...argv] = envdToolCommand('step-process', ['--root', root, '--id-shift', '100000', ...args], { root: envdSandboxDir });
    const res = spawnSync(cmd!, argv, {
      encoding: 'utf8',
      env: {},
      timeout: 30_000,
    });
    return { status: res.status, stdout: res.stdout, stderr: res.stderr, value: res.status === 0 ? (JSON.parse(res.stdout) as Record<string, unknown>) : undefined };
  };

  test('the user, home, working directory and shell envd would give a step: the named user, else the default, else root', () => {
    const root = withUsers({ 'home/alice/': '', 'home/bob/src/': '', 'root/': '', 'usr/bin/bash': '' });
    // Debian's merged /usr: /bin is a link to usr/bin, followed within the image.
    symlinkSync('usr/bin', join(root, 'bin'));
    expect(stepProcess(root, ['--default-user', 'user', '--user', 'bob', '--cwd', 'src']).value).toEqual({ user: 'bob', uid: 1001, gid: 1050, home: '/home/bob', cwd: '/home/bob/src', shell: ['/bin/bash', '-l', '-c'] });
    expect(stepProcess(root, ['--default-user', 'alice']).value).toMatchObject({ user: 'alice', uid: 1000, cwd: '/home/alice' });
    expect(stepProcess(root, ['--default-user', 'alice', '--default-workdir', '/tmp']).value).toMatchObject({ user: 'alice', cwd: '/tmp' });
    // The default user is not in this image: root, as envd falls back to it.
    expect(stepProcess(root, ['--default-user', 'user']).value).toMatchObject({ user: 'root', uid: 0, gid: 0, home: '/root', cwd: '/root' });
  });

  test('an image without bash runs command lines with sh, and root is there without a passwd file', () => {
    const root = image({ 'bin/sh': '' });
    expect(stepProcess(root, ['--default-user', 'user', '--user', 'root']).value).toEqual({ user: 'root', uid: 0, gid: 0, home: '/', cwd: '/', shell: ['/bin/sh', '-c'] });
  });

  test('a user or working directory that is not there is named, as envd names it', () => {
    const root = withUsers({ 'etc/motd': '' });
    expect(stepProcess(root, ['--default-user', 'user', '--user', 'nobody-here'])).toMatchObject({ status: 1, stderr: "step-process: user 'nobody-here' does not exist\n" });
    expect(stepProcess(root, ['--default-user', 'root', '--cwd', '/nowhere'])).toMatchObject({ status: 1, stderr: "step-process: cwd '/nowhere' does not exist\n" });
    expect(stepProcess(root, ['--default-user', 'root', '--cwd', '/etc/motd'])).toMatchObject({ status: 1, stderr: "step-process: cwd '/etc/motd' is not a directory\n" });
  });

  test("the image's passwd file is read through its own symlinks, never the host's", () => {
    const root = image({ 'etc/accounts/passwd': 'carol:x:1234:1234::/:/bin/sh\n' });
    symlinkSync('/../../../etc/accounts/passwd', join(root, 'etc/passwd'));
    expect(stepProcess(root, ['--default-user', 'carol']).value).toMatchObject({ user: 'carol', uid: 1234 });
    // The host's own passwd names root with /root; the image's does not.
    rmSync(join(root, 'etc/accounts/passwd'));
    expect(stepProcess(root, ['--default-user', 'carol']).value).toMatchObject({ user: 'root', home: '/' });
  });
});
