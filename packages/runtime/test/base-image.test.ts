// The base image's root filesystem, made by a real mmdebstrap from the
// host's Debian mirror. The first run builds it (minutes) into the cache the
// test suites share (tools/testing/base-image.mjs); later runs find it there.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { baseRecipe, buildBaseRootfs, hostDebianSources, logPath, processesIn, progressOfLog, type BaseBuildProgress, type BaseRootfs } from '../src/base-image.js';
import { mountPoints } from '../src/mounts.js';
import { RuntimeError } from '../src/runtime.js';
import { baseImageTar, testCacheDir } from '../../../tools/testing/base-image.mjs';

const exec = promisify(execFile);
const MINUTES = 60_000;

const temps: string[] = [];
function tempDir(prefix: string, parent = tmpdir()): string {
  const dir = mkdtempSync(join(parent, prefix));
  // apt downloads as `_apt`, which must reach a build in here.
  chmodSync(dir, 0o755);
  temps.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temps) {
    expect([...mountPoints()].filter((m) => m.startsWith(dir + '/'))).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Holds the cache directory's build lock from another process, as a build running there would. */
async function holdLock(cacheDir: string): Promise<{ release(): Promise<void> }> {
  // flock(1) takes the lock and becomes `sleep` holding it.
  const other = spawn('flock', ['--exclusive', '--no-fork', join(cacheDir, 'base.lock'), 'sh', '-c', 'echo held && exec sleep 600'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const gone = new Promise((r) => other.once('exit', r));
  await new Promise((r) => other.stdout.once('data', r));
  return {
    async release() {
      other.kill('SIGKILL');
      await gone;
    },
  };
}

describe("the host's Debian sources", () => {
  function aptDir(files: Record<string, string>): string {
    const dir = tempDir('paddock-apt-');
    mkdirSync(join(dir, 'sources.list.d'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return dir;
  }

  test('deb822 .sources: the archive and the security archive, past disabled and foreign entries', () => {
    const dir = aptDir({
      'sources.list.d/a-nodesource.sources': 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n',
      'sources.list.d/cloud.list': 'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n',
      'sources.list.d/debian.sources': [
        'Types: deb',
        'URIs: http://old.example.org/debian',
        'Suites: bookworm',
        'Components: main',
        'Enabled: no',
        '',
        'Types: deb',
        '# a comment inside the stanza',
        'URIs: http://mirror.example.org/debian/',
        'Suites: bookworm bookworm-updates',
        'Components: main',
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
        '',
        'Types: deb',
        'URIs: http://security.example.org/debian-security',
        'Suites: bookworm-security',
        'Components: main',
        '',
      ].join('\n'),
    });
    expect(hostDebianSources(dir)).toEqual({ mirror: 'http://mirror.example.org/debian', security: 'http://security.example.org/debian-security' });
  });

  test('one-line sources.list with options and comments; deb-src and cdrom lines do not count', () => {
    const dir = aptDir({
      'sources.list': [
        '# deb http://commented.example.org/debian bookworm main',
        'deb cdrom:[Debian GNU/Linux 12]/ bookworm main',
        'deb-src http://src.example.org/debian bookworm main',
        'deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] https://mirror.example.org/debian trixie main contrib',
        'deb http://security.example.org/debian-security trixie-security main',
      ].join('\n'),
    });
    expect(hostDebianSources(dir)).toEqual({ mirror: 'https://mirror.example.org/debian', security: 'http://security.example.org/debian-security' });
  });

  test('a host without a Debian source has none, and one without a security source gets none', () => {
    expect(hostDebianSources(aptDir({ 'sources.list': 'deb http://archive.ubuntu.com/ubuntu jammy main\n' }))).toBeUndefined();
    expect(hostDebianSources(aptDir({ 'sources.list': 'deb http://mirror.example.org/debian bookworm main\n' }))).toEqual({ mirror: 'http://mirror.example.org/debian' });
  });
});

describe('the recipe', () => {
  const sources = { mirror: 'http://deb.debian.org/debian', security: 'http://deb.debian.org/debian-security' };

  test('its hash is the same for the same recipe and differs with the mirror, the security mirror and the suite', () => {
    const a = baseRecipe(sources);
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(baseRecipe({ ...sources, mirror: 'http://deb.debian.org/debian/' }).hash).toBe(a.hash);
    expect(baseRecipe({ ...sources, mirror: 'http://ftp.de.debian.org/debian' }).hash).not.toBe(a.hash);
    expect(baseRecipe({ mirror: sources.mirror }).hash).not.toBe(a.hash);
    expect(baseRecipe(sources, 'trixie').hash).not.toBe(a.hash);
    expect(a.sourceLines).toEqual([
      'deb http://deb.debian.org/debian bookworm main',
      'deb http://deb.debian.org/debian bookworm-updates main',
      'deb http://deb.debian.org/debian-security bookworm-security main',
    ]);
  });

  test('a mirror that is not an http(s) URL, or a suite that is not a name, is refused by name', () => {
    expect(() => baseRecipe({ mirror: 'ftp://deb.debian.org/debian' })).toThrow("Debian mirror 'ftp://deb.debian.org/debian' is not an http(s) URL");
    expect(() => baseRecipe({ mirror: 'http://x/debian bookworm main\ndeb http://y/debian' })).toThrow(RuntimeError);
    expect(() => baseRecipe({ mirror: sources.mirror, security: '[trusted=yes]' })).toThrow("Debian security mirror '[trusted=yes]' is not an http(s) URL");
    expect(() => baseRecipe(sources, 'bookworm main')).toThrow("Debian suite 'bookworm main' is not a suite name");
  });
});

describe('the built base image', () => {
  const cacheDir = testCacheDir();
  let built: BaseRootfs;
  let listing: Map<string, { type: string; mode: string; owner: string; link?: string }>;

  const fileText = async (path: string) => (await exec('tar', ['-xOf', built.tarPath, `.${path}`], { maxBuffer: 16 << 20 })).stdout;

  beforeAll(async () => {
    built = await baseImageTar({ cacheDir });
    // `tar -tv`: `drwxr-x--- 1000/1000 0 2026-01-01 00:00 ./home/user/` and `... ./usr/bin/python -> python3`.
    const { stdout } = await exec('tar', ['-tvf', built.tarPath, '--numeric-owner'], { maxBuffer: 256 << 20 });
    listing = new Map();
    for (const line of stdout.split('\n')) {
      const m = /^(\S)(\S{9})\s+(\d+\/\d+)\s+\d+\s+\S+\s+\S+\s+\.(\/.*?)(?: -> (.*))?$/.exec(line);
      if (m) listing.set(m[4]!.replace(/\/$/, '') || '/', { type: m[1]!, mode: m[2]!, owner: m[3]!, ...(m[5] ? { link: m[5] } : {}) });
    }
  }, 15 * MINUTES);

  test('is a tar in the cache named for its recipe hash, with the log of its build beside it', () => {
    expect(built.tarPath).toBe(join(cacheDir, `base-${built.recipeHash}.tar`));
    expect(statSync(built.tarPath).size).toBe(built.size);
    expect(existsSync(logPath(built.tarPath))).toBe(true);
  });

  test('has python, pip, node, npm, git, curl and sudo', () => {
    for (const path of ['/usr/bin/python3', '/usr/bin/python', '/usr/bin/pip', '/usr/bin/pip3', '/usr/bin/node', '/usr/bin/npm', '/usr/bin/git', '/usr/bin/curl', '/usr/bin/wget', '/usr/bin/gcc', '/usr/bin/make', '/usr/bin/bash']) {
      expect([path, listing.has(path)]).toEqual([path, true]);
    }
    expect(listing.get('/usr/bin/python')).toMatchObject({ type: 'l', link: 'python3' });
    expect(listing.get('/usr/bin/sudo')).toMatchObject({ type: '-', mode: 'rwsr-xr-x', owner: '0/0' });
  });

  test('has the user `user` (1000) with its home and password-less sudo', async () => {
    expect(await fileText('/etc/passwd')).toMatch(/^user:x:1000:1000:[^:]*:\/home\/user:\/bin\/bash$/m);
    expect(await fileText('/etc/group')).toMatch(/^sudo:x:27:user$/m);
    expect(listing.get('/home/user')).toMatchObject({ type: 'd', owner: '1000/1000' });
    expect(listing.get('/home/user/.bashrc')).toMatchObject({ owner: '1000/1000' });
    expect(listing.get('/etc/sudoers.d/paddock-user')).toMatchObject({ type: '-', mode: 'r--r-----', owner: '0/0' });
    expect(await fileText('/etc/sudoers.d/paddock-user')).toBe('user ALL=(ALL:ALL) NOPASSWD: ALL\n');
  });

  test("carries nothing of the host's: no device nodes, no resolv.conf, its own hostname and hosts, ids inside the sandbox range", async () => {
    const entries = [...listing.entries()];
    expect(entries.filter(([, e]) => e.type === 'c' || e.type === 'b').map(([p]) => p)).toEqual([]);
    expect(entries.filter(([, e]) => e.owner.split('/').some((id) => Number(id) >= 65536)).map(([p]) => p)).toEqual([]);
    expect(listing.has('/etc/resolv.conf')).toBe(false);
    expect(await fileText('/etc/hostname')).toBe('sandbox\n');
    expect(await fileText('/etc/hosts')).toMatch(/^127\.0\.0\.1\tlocalhost$/m);
    expect(await fileText('/etc/apt/sources.list')).toContain(`deb ${baseRecipe(hostDebianSources() ?? { mirror: 'http://deb.debian.org/debian' }).sources.mirror} bookworm main`);
  });

  test('keeps no apt lists and no downloaded packages, and pip may install for the user', async () => {
    const paths = [...listing.keys()];
    expect(paths.filter((p) => p.startsWith('/var/lib/apt/lists/') && p.includes('_'))).toEqual([]);
    expect(paths.filter((p) => p.startsWith('/var/cache/apt/archives/') && p.endsWith('.deb'))).toEqual([]);
    expect(await fileText('/etc/pip.conf')).toBe('[global]\nbreak-system-packages = true\n');
  });

  test('its log replays as progress through every step, with counts and percentages', () => {
    const events = progressOfLog(readFileSync(logPath(built.tarPath), 'utf8').split('\n'));
    // The second download shows only when apt fetches something the host's apt cache lacked.
    const stages = events.map((e) => e.stage).filter((s, i, all) => s !== all[i - 1]).join(' ');
    expect(stages).toMatch(/^resolving downloading extracting installing (downloading installing )?customizing cleaning writing cleaning$/);
    const counted = events.filter((e) => /^installing packages \(\d+\/\d+\)$/.test(e.message));
    expect(counted.length).toBeGreaterThan(50);
    const [, n, m] = /\((\d+)\/(\d+)\)/.exec(counted.at(-1)!.message)!;
    expect(Number(n)).toBe(Number(m));
    expect(counted.at(-1)!.percent).toBeCloseTo(100, 0);
    for (const stage of ['downloading', 'installing'] as const) {
      const percents = events.filter((e) => e.stage === stage && e.percent !== undefined).map((e) => e.percent!);
      expect(percents.every((p) => p >= 0 && p <= 100)).toBe(true);
    }
  });

  test('a second call finds it in the cache without running mmdebstrap', async () => {
    const seen: string[] = [];
    const again = await buildBaseRootfs({ cacheDir, onProgress: (p) => seen.push(p.message), onLog: (l) => seen.push(l) });
    expect(again).toEqual({ tarPath: built.tarPath, recipeHash: built.recipeHash, fromCache: true, size: built.size });
    expect(seen).toEqual([]);
  });

  describe('run in a chroot of its unpacked tree', () => {
    let root: string;
    beforeAll(async () => {
      root = join(tempDir('paddock-base-'), 'root');
      mkdirSync(root);
      await exec('tar', ['-xpf', built.tarPath, '--numeric-owner', '--xattrs', '-C', root], { maxBuffer: 16 << 20 });
      // The tar has no /dev: give the chroot the few nodes programs open.
      mkdirSync(join(root, 'dev'), { recursive: true });
      for (const [name, minor] of [['null', 3], ['zero', 5], ['full', 7], ['random', 8], ['urandom', 9]] as const) {
        await exec('mknod', ['-m', '666', join(root, 'dev', name), 'c', '1', String(minor)]);
      }
      const probe = join(root, 'tmp/probe');
      mkdirSync(probe);
      writeFileSync(join(probe, 'setup.py'), "from setuptools import setup\nsetup(name='paddockprobe', version='1.0', py_modules=['paddockprobe'])\n");
      writeFileSync(join(probe, 'paddockprobe.py'), "ANSWER = 42\n");
      // pip builds in the source tree, which must be the user's.
      await exec('chown', ['-R', '1000:1000', probe]);
      chmodSync(join(root, 'tmp'), 0o1777);
    }, 5 * MINUTES);

    /** Runs argv in the chroot (its own pid and mount namespaces, /proc mounted there only), as root or as `user`. */
    async function inRoot(argv: string[], as: 'root' | 'user' = 'root'): Promise<{ stdout: string; stderr: string }> {
      const env = ['env', '-i', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=C.UTF-8', `HOME=${as === 'user' ? '/home/user' : '/root'}`];
      const asUser = as === 'user' ? ['setpriv', '--reuid', '1000', '--regid', '1000', '--init-groups'] : [];
      return exec('unshare', ['--pid', '--fork', '--kill-child', `--mount-proc=${join(root, 'proc')}`, 'chroot', root, ...asUser, ...env, ...argv], { timeout: 2 * MINUTES, maxBuffer: 16 << 20 });
    }

    test('python, node, npm, git and a C compiler run', async () => {
      expect((await inRoot(['python', '--version'])).stdout).toMatch(/^Python 3\.\d+\.\d+$/m);
      expect((await inRoot(['node', '-e', 'console.log(1 + 1)'])).stdout).toBe('2\n');
      expect((await inRoot(['npm', '--version'], 'user')).stdout).toMatch(/^\d+\.\d+\.\d+$/m);
      expect((await inRoot(['git', '--version'])).stdout).toMatch(/^git version /);
      expect((await inRoot(['sh', '-c', "printf 'int main(void){return 7;}' | cc -x c - -o /tmp/seven && /tmp/seven; echo $?"])).stdout).toBe('7\n');
    });

    test('user 1000 is `user` and sudo gives it root without a password', async () => {
      expect((await inRoot(['id', '-un'], 'user')).stdout).toBe('user\n');
      expect((await inRoot(['sudo', '-n', 'id', '-u'], 'user')).stdout).toBe('0\n');
      await expect(inRoot(['sudo', '-n', 'true'], 'user')).resolves.toBeDefined();
    });

    test("a bash login shell sets root's and the user's PATH without running `id`; sh still asks it", async () => {
      // An `id` first on PATH that leaves a mark, so that a run of it shows.
      const marks = join(root, 'tmp/id-marks');
      mkdirSync(marks, { mode: 0o1777 });
      chmodSync(marks, 0o1777);
      writeFileSync(join(root, 'usr/local/bin/id'), '#!/bin/sh\necho "$$" > /tmp/id-marks/$(/usr/bin/id -u)\nexec /usr/bin/id "$@"\n', { mode: 0o755 });
      try {
        expect((await inRoot(['bash', '-l', '-c', 'echo "$PATH"'], 'user')).stdout).toBe('/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\n');
        expect((await inRoot(['bash', '-l', '-c', 'echo "$PATH"'])).stdout).toBe('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n');
        expect(readdirSync(marks)).toEqual([]);
        expect((await inRoot(['sh', '-l', '-c', 'echo "$PATH"'], 'user')).stdout).toBe('/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\n');
        expect(readdirSync(marks)).toEqual(['1000']);
      } finally {
        rmSync(join(root, 'usr/local/bin/id'));
      }
    });

    test('pip installs a package for the user, and venv makes an environment with its own pip', async () => {
      expect((await inRoot(['pip', '--version'], 'user')).stdout).toMatch(/^pip \d+/);
      await inRoot(['pip', 'install', '--disable-pip-version-check', '--no-index', '--no-build-isolation', '/tmp/probe'], 'user');
      expect((await inRoot(['python', '-c', 'import paddockprobe, sys; print(paddockprobe.ANSWER, paddockprobe.__file__.startswith("/home/user/.local/"))'], 'user')).stdout).toBe('42 True\n');
      await inRoot(['python', '-m', 'venv', '/tmp/venv'], 'user');
      expect((await inRoot(['/tmp/venv/bin/pip', '--version'], 'user')).stdout).toContain('/tmp/venv/');
    }, 5 * MINUTES);
  });
});

describe('a build that cannot finish', () => {
  let server: Server;
  let mirror: string;
  beforeAll(async () => {
    // A mirror that answers everything with 404: apt finds no release there.
    server = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    mirror = `http://127.0.0.1:${(server.address() as AddressInfo).port}/debian`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const leftovers = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('.build-') || n.endsWith('.tar'));

  test('a mirror without the suite fails with an error that names the mirror, and leaves nothing behind', async () => {
    const cacheDir = tempDir('paddock-base-cache-');
    const failed = buildBaseRootfs({ cacheDir, mirror });
    await expect(failed).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(failed).rejects.toThrow(`from the Debian mirror ${mirror}`);
    await expect(failed).rejects.toThrow('404');
    expect(leftovers(cacheDir)).toEqual([]);
    expect(processesIn(cacheDir)).toEqual([]);
  }, 5 * MINUTES);

  test('a build waits for another holding the cache directory, can be aborted while waiting, and goes on once the other is done', async () => {
    const cacheDir = tempDir('paddock-base-cache-');
    const other = await holdLock(cacheDir);
    try {
      const ac = new AbortController();
      const seen: BaseBuildProgress[] = [];
      const waiting = buildBaseRootfs({
        cacheDir,
        mirror,
        signal: ac.signal,
        onProgress: (p) => {
          seen.push(p);
          if (p.stage === 'waiting') ac.abort();
        },
      });
      await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
      expect(seen.map((p) => p.stage)).toEqual(['waiting']);
      // The waiting build's own flock is gone with it.
      expect(processesIn(cacheDir)).toEqual([]);
    } finally {
      await other.release();
    }
    // Now the lock is free: the build runs (and fails at the mirror).
    await expect(buildBaseRootfs({ cacheDir, mirror })).rejects.toThrow(`from the Debian mirror ${mirror}`);
  }, 5 * MINUTES);

  test('a forced rebuild aborted mid-way kills mmdebstrap and what it started, removes its partial output and keeps the cached tar', async () => {
    // A cache of its own holding the built tar (a hard link of the shared
    // one, so beside it on the same filesystem): builds of other test runs
    // in the shared cache do not hold this one up.
    const shared = await baseImageTar({ quiet: true });
    const cacheDir = tempDir('paddock-base-cache-', dirname(testCacheDir()));
    const cached = { tarPath: join(cacheDir, basename(shared.tarPath)) };
    linkSync(shared.tarPath, cached.tarPath);
    const before = statSync(cached.tarPath);
    const ac = new AbortController();
    const seen: BaseBuildProgress[] = [];
    let buildDir = '';
    const rebuilding = buildBaseRootfs({
      cacheDir,
      force: true,
      signal: ac.signal,
      onLog: (line) => {
        // `I: using /var/tmp/paddock-test-cache/.build-…/mmdebstrap.XXXX as tempdir`
        const m = /^I: using (\S+)\/mmdebstrap\.\w+ as tempdir$/.exec(line);
        if (m) buildDir = m[1]!;
      },
      onProgress: (p) => {
        seen.push(p);
        // Abort while the essential packages are unpacked: mmdebstrap has children then.
        if (p.stage === 'extracting') ac.abort();
      },
    });
    await expect(rebuilding).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen.map((p) => p.stage)).toEqual(expect.arrayContaining(['resolving', 'downloading', 'extracting']));
    expect(seen.at(-1)).toMatchObject({ stage: 'extracting' });
    expect(buildDir).toContain(join(cacheDir, '.build-'));
    expect(existsSync(buildDir)).toBe(false);
    expect(processesIn(buildDir)).toEqual([]);
    expect([...mountPoints()].filter((m) => m.startsWith(buildDir + '/'))).toEqual([]);
    const after = statSync(cached.tarPath);
    expect([after.ino, after.size, after.mtimeMs]).toEqual([before.ino, before.size, before.mtimeMs]);
  }, 10 * MINUTES);

  test("a killed build's leftovers go with the next call, even one the cache answers, but not while another holds the lock", async () => {
    const shared = await baseImageTar({ quiet: true });
    const cacheDir = tempDir('paddock-base-cache-', dirname(testCacheDir()));
    linkSync(shared.tarPath, join(cacheDir, basename(shared.tarPath)));
    const leftover = join(cacheDir, '.build-0123456789ab-deadbeef');
    mkdirSync(join(leftover, 'mmdebstrap.Xq3z/usr/bin'), { recursive: true });
    writeFileSync(join(leftover, 'rootfs.tar'), 'half a tar');
    const other = await holdLock(cacheDir);
    try {
      expect(await buildBaseRootfs({ cacheDir })).toMatchObject({ fromCache: true });
      // Whoever holds the lock may be building in there.
      expect(existsSync(leftover)).toBe(true);
    } finally {
      await other.release();
    }
    expect(await buildBaseRootfs({ cacheDir })).toMatchObject({ fromCache: true });
    expect(existsSync(leftover)).toBe(false);
  });
});
