// envd from its self-contained directory (dist/sandbox, the build's) in
// containers whose images have nothing envd could use: a scratch image with
// one static busybox, the same without even the applet links (no shell at
// all), an Alpine-like musl image and a small glibc one with only bash. Each
// image is assembled here from this machine's Debian packages (busybox-static,
// musl, musl-tools, bash) and run by runc as the runtime runs sandboxes: in
// a user namespace, on files owned by the sandbox's shifted id range, the
// directory bind-mounted read-only at /.paddock and envd started with
// envdCommand. The test talks to envd over a unix socket in a directory
// bind-mounted from the host.
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, copyFileSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { EventType, Filesystem, Process, type ProcessEvent } from '@paddock/models';
import { envdCommand, envdMountPoint, envdNodeFlags, envdSandboxDir } from '../src/index.js';

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** In envd's own environment only: no process envd starts may see it. */
const ENVD_ONLY = { PATH: `${envdMountPoint}/bin:/envd-only`, PADDOCK_TEST_ENVD_ONLY: 'leaked' };

/** Sandbox uid/gid 0..65535 are host ids ID_SHIFT.., as the runtime maps them. */
const ID_SHIFT = 1_000_000_000;
const ID_RANGE = 65536;

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'envd-sandbox-'));
  // Root of a sandbox is nobody on the host: it must be let through to the images below.
  chmodSync(work, 0o755);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

// ----------------------------------------------------------------- images

type Kind = 'busybox' | 'bare' | 'musl' | 'glibc';

/** Copies the host file at `path` (links followed) to the same path in `rootfs`. */
function copyIn(rootfs: string, path: string, to = path): void {
  mkdirSync(dirname(join(rootfs, to)), { recursive: true });
  copyFileSync(path, join(rootfs, to));
  chmodSync(join(rootfs, to), 0o755);
}

/** /bin/busybox of busybox-static and, unless `bare`, a link for every applet, as `busybox --install -s` makes them. */
function installBusybox(rootfs: string, bare: boolean): void {
  copyIn(rootfs, '/bin/busybox');
  if (bare) return;
  for (const applet of execFileSync('/bin/busybox', ['--list-full'], { encoding: 'utf8' }).split('\n')) {
    if (!applet || applet === 'bin/busybox') continue;
    mkdirSync(dirname(join(rootfs, applet)), { recursive: true });
    symlinkSync('/bin/busybox', join(rootfs, applet));
  }
}

/** root and `user` (1000) with their homes, as Debian and Alpine images have them. */
function addUsers(rootfs: string, shell: string): void {
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(join(rootfs, 'etc/passwd'), `root:x:0:0:root:/root:${shell}\nuser:x:1000:1000::/home/user:${shell}\n`);
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nuser:x:1000:\n');
  mkdirSync(join(rootfs, 'root'), { mode: 0o700 });
  mkdirSync(join(rootfs, 'home/user'), { recursive: true });
  chownSync(join(rootfs, 'home/user'), 1000, 1000);
}

/** A root filesystem of `kind` in `rootfs`. */
function makeImage(kind: Kind, rootfs: string): void {
  mkdirSync(rootfs, { recursive: true });
  if (kind === 'busybox' || kind === 'bare') {
    // Nothing but busybox: no /etc (no passwd), no /tmp, no /root.
    installBusybox(rootfs, kind === 'bare');
  } else if (kind === 'musl') {
    installBusybox(rootfs, false);
    const loader = readdirSync('/lib').find((n) => n.startsWith('ld-musl-'));
    if (!loader) throw new Error('musl is not installed: no /lib/ld-musl-*');
    copyIn(rootfs, join('/lib', loader));
    // A program of the image's own, linked against its musl: it shows what a process maps.
    const src = join(work, 'maps.c');
    writeFileSync(src, '#include <stdio.h>\nint main(void) { FILE *f = fopen("/proc/self/maps", "r"); int c; if (!f) return 1; while ((c = getc(f)) != EOF) putchar(c); return 0; }\n');
    mkdirSync(join(rootfs, 'usr/bin'), { recursive: true });
    execFileSync('musl-gcc', ['-o', join(rootfs, 'usr/bin/maps'), src]);
    addUsers(rootfs, '/bin/sh');
    mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
  } else {
    // bash and the libraries it links, where it finds them here, and nothing else.
    copyIn(rootfs, '/bin/bash');
    for (const line of execFileSync('ldd', ['/bin/bash'], { encoding: 'utf8' }).split('\n')) {
      const path = /(\/\S+) \(0x[0-9a-f]+\)$/.exec(line)?.[1];
      if (path) copyIn(rootfs, path);
    }
    addUsers(rootfs, '/bin/bash');
    mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
  }
}

/** Moves the owner of `path` and of all below it into the sandbox's range, as the runtime unpacks image layers. */
function shiftOwners(path: string): void {
  const st = lstatSync(path);
  lchownSync(path, st.uid + ID_SHIFT, st.gid + ID_SHIFT);
  if (st.isDirectory()) for (const name of readdirSync(path)) shiftOwners(join(path, name));
}

// ---------------------------------------------------------------- sandboxes

interface Sandbox {
  socket: string;
  logs: string[];
  ready: Record<string, unknown>;
  processes: Client<typeof Process>;
  filesystem: Client<typeof Filesystem>;
  stop(): Promise<void>;
}

const CAPABILITIES = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID'];

/** Runs envd in a runc container of a fresh `kind` image; resolves once it is ready. */
async function startSandbox(kind: Kind, envdArgs: string[] = [], extraMounts: object[] = []): Promise<Sandbox> {
  const id = `envd-test-${kind}-${process.pid}`;
  const bundle = join(work, kind);
  const rootfs = join(bundle, 'rootfs');
  const sockDir = join(bundle, 'sock');
  const runcRoot = join(work, 'runc');
  makeImage(kind, rootfs);
  mkdirSync(sockDir, { mode: 0o700 });
  shiftOwners(rootfs);
  shiftOwners(sockDir);
  const config = {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: envdCommand({ args: ['--socket', '/run/envd/envd.sock', '--default-user', 'user', ...envdArgs] }),
      env: Object.entries(ENVD_ONLY).map(([k, v]) => `${k}=${v}`),
      cwd: '/',
      capabilities: { bounding: CAPABILITIES, effective: CAPABILITIES, permitted: CAPABILITIES },
      noNewPrivileges: false,
    },
    root: { path: rootfs, readonly: false },
    hostname: id,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'] },
      { destination: envdMountPoint, type: 'bind', source: envdSandboxDir, options: ['rbind', 'ro', 'nosuid', 'nodev'] },
      { destination: '/run/envd', type: 'bind', source: sockDir, options: ['rbind', 'rw'] },
      ...extraMounts,
    ],
    linux: {
      uidMappings: [{ containerID: 0, hostID: ID_SHIFT, size: ID_RANGE }],
      gidMappings: [{ containerID: 0, hostID: ID_SHIFT, size: ID_RANGE }],
      namespaces: [{ type: 'user' }, { type: 'pid' }, { type: 'network' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
    },
  };
  writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  const runc: ChildProcess = spawn('runc', ['--root', runcRoot, 'run', '--bundle', bundle, id], { stdio: ['ignore', 'inherit', 'pipe'] });
  const logs: string[] = [];
  const exited = once(runc, 'exit');
  const stop = async () => {
    spawnSync('runc', ['--root', runcRoot, 'delete', '--force', id]);
    const timer = setTimeout(() => runc.kill('SIGKILL'), 10_000);
    if (runc.exitCode === null && runc.signalCode === null) await exited;
    clearTimeout(timer);
  };
  try {
    const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: runc.stderr! }).on('line', (line) => {
        logs.push(line);
        try {
          const msg = JSON.parse(line) as Record<string, unknown>;
          if (msg.msg === 'ready') resolve(msg);
        } catch {
          // runc's own words: they stay in the log
        }
      });
      void exited.then(([code]) => reject(new Error(`envd's container (${kind}) exited with ${code} before envd was ready:\n${logs.join('\n')}`)));
      setTimeout(() => reject(new Error(`envd (${kind}) was not ready in 30 s:\n${logs.join('\n')}`)), 30_000).unref();
    });
    const socket = join(sockDir, 'envd.sock');
    const transport = createConnectTransport({ baseUrl: 'http://envd', httpVersion: '1.1', nodeOptions: { socketPath: socket } });
    return { socket, logs, ready, processes: createClient(Process, transport), filesystem: createClient(Filesystem, transport), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A sandbox of its own for the tests of one describe block: started before them, stopped after. */
function useSandbox(...args: Parameters<typeof startSandbox>): () => Sandbox {
  let sb: Sandbox | undefined;
  beforeAll(async () => {
    sb = await startSandbox(...args);
  }, 60_000);
  afterAll(() => sb?.stop());
  return () => sb!;
}

/** One HTTP request to envd's socket. */
function http(sb: Sandbox, method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sb.socket, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Outcome {
  stdout: string;
  stderr: string;
  exitCode: number | undefined;
}

async function run(sb: Sandbox, cmd: string, args: string[], user?: string): Promise<Outcome> {
  const headers: Record<string, string> = user ? { authorization: `Basic ${Buffer.from(`${user}:`).toString('base64')}` } : {};
  const out = { stdout: [] as Uint8Array[], stderr: [] as Uint8Array[] };
  let exitCode: number | undefined;
  for await (const res of sb.processes.start({ process: { cmd, args, envs: {} }, stdin: false }, { headers })) {
    const ev: ProcessEvent['event'] | undefined = res.event?.event;
    if (ev?.case === 'data' && (ev.value.output.case === 'stdout' || ev.value.output.case === 'stderr')) out[ev.value.output.case].push(ev.value.output.value);
    if (ev?.case === 'end') exitCode = ev.value.exitCode;
  }
  return { stdout: Buffer.concat(out.stdout).toString(), stderr: Buffer.concat(out.stderr).toString(), exitCode };
}

/** As E2B's clients run a command. */
const sh = (sb: Sandbox, script: string, user?: string) => run(sb, '/bin/bash', ['-l', '-c', script], user);

/** A terminal as E2B's clients open one (`/bin/bash -i -l`), fed `input`; gives what it printed once it ended. */
async function terminal(sb: Sandbox, input: string): Promise<string> {
  const stream = sb.processes.start(
    { process: { cmd: '/bin/bash', args: ['-i', '-l'], envs: { TERM: 'xterm-256color' } }, pty: { size: { cols: 80, rows: 24 } } },
    { timeoutMs: 20_000 },
  );
  const out: Uint8Array[] = [];
  let sent = false;
  for await (const res of stream) {
    const ev = res.event?.event;
    if (ev?.case === 'start' && !sent) {
      sent = true;
      await sb.processes.sendInput({ process: { selector: { case: 'pid', value: ev.value.pid } }, input: { input: { case: 'pty', value: Buffer.from(input) } } });
    }
    if (ev?.case === 'data' && ev.value.output.case === 'pty') out.push(ev.value.output.value);
  }
  return Buffer.concat(out).toString();
}

/** What every image must serve: envd with its code cache, a file written and read back, a listing, a watch, /metrics. */
async function filesWatchMetrics(sb: Sandbox): Promise<void> {
  expect(sb.ready.codeCache).toBe('accepted');
  const up = await http(sb, 'POST', `/files?${new URLSearchParams({ path: 'notes/hello.txt' })}`, 'hello from the host', { 'content-type': 'application/octet-stream' });
  expect(up.status).toBe(200);
  const down = await http(sb, 'GET', `/files?${new URLSearchParams({ path: 'notes/hello.txt' })}`);
  expect([down.status, down.body]).toEqual([200, 'hello from the host']);

  const listing = await sb.filesystem.listDir({ path: 'notes', depth: 1 });
  expect(listing.entries.map((e) => e.name)).toEqual(['hello.txt']);

  const abort = new AbortController();
  const it = sb.filesystem.watchDir({ path: 'notes', recursive: false }, { signal: abort.signal })[Symbol.asyncIterator]();
  expect((await it.next()).value?.event.case).toBe('start');
  const seen = (async () => {
    for (;;) {
      const r = await it.next();
      if (r.done) return undefined;
      const ev = r.value.event;
      if (ev.case === 'filesystem' && ev.value.name === 'second.txt' && ev.value.type === EventType.CREATE) return ev.value.name;
    }
  })();
  expect((await http(sb, 'POST', `/files?${new URLSearchParams({ path: 'notes/second.txt' })}`, '2', { 'content-type': 'application/octet-stream' })).status).toBe(200);
  const timeout = new Promise((r) => setTimeout(r, 10_000).unref()).then(() => 'no CREATE event in 10 s');
  expect(await Promise.race([seen, timeout])).toBe('second.txt');
  abort.abort();
  await seen.catch(() => undefined);

  const metrics = await http(sb, 'GET', '/metrics');
  expect(metrics.status).toBe(200);
  const m = JSON.parse(metrics.body) as Record<string, number>;
  for (const key of ['ts', 'cpu_count', 'cpu_used_pct', 'mem_total', 'mem_used', 'disk_used', 'disk_total']) expect(typeof m[key]).toBe('number');
  expect(m.cpu_count).toBeGreaterThanOrEqual(1);
}

// -------------------------------------------------------------------- tests

describe('the sandbox directory', () => {
  test('holds node, its loader and libraries and the bundle with its addons, no node_modules, and no link that leads out of it', () => {
    const manifest = JSON.parse(readFileSync(join(envdSandboxDir, '../sandbox.json'), 'utf8')) as { loader: string; node: string };
    expect(manifest.loader).toMatch(/^ld-linux-.+\.so\.\d+$/);
    // The node it records is the one in bin/, run through the directory's loader.
    const bin = (p: string) => join(envdSandboxDir, p);
    expect(execFileSync(bin(`lib/${manifest.loader}`), ['--library-path', bin('lib'), bin('bin/node'), '-v'], { encoding: 'utf8' }).trim()).toBe(manifest.node);
    for (const f of ['bin/node', `lib/${manifest.loader}`, 'lib/libc.so.6', 'envd/main.cjs', 'envd/envd.cjs', 'envd/envd.cjs.cache', 'envd/envd_native.node', 'envd/build/Release/pty.node']) {
      expect([f, lstatSync(join(envdSandboxDir, f)).isFile()]).toEqual([f, true]);
    }
    // node-pty's JavaScript is in the bundle: nothing is loaded from node_modules.
    expect(readdirSync(join(envdSandboxDir, 'envd')).sort()).toEqual(['build', 'envd.cjs', 'envd.cjs.cache', 'envd.cjs.map', 'envd_native.node', 'main.cjs', 'main.cjs.map', 'tools.cjs', 'tools.cjs.map']);
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        const path = join(dir, e.name);
        if (e.isDirectory()) return walk(path);
        if (!e.isSymbolicLink()) return [];
        const target = resolve(dirname(path), readlinkSync(path));
        return relative(envdSandboxDir, target).startsWith('..') ? [`${path} -> ${target}`] : [];
      });
    expect(walk(envdSandboxDir)).toEqual([]);
  });

  test('envdCommand starts node through the directory\'s own loader, told where the libraries are on its command line', () => {
    const { loader } = JSON.parse(readFileSync(join(envdSandboxDir, '../sandbox.json'), 'utf8')) as { loader: string };
    expect(envdCommand({ args: ['--listen-fd', '3'] })).toEqual([
      `/.paddock/lib/${loader}`,
      '--library-path',
      '/.paddock/lib',
      '--inhibit-cache',
      '/.paddock/bin/node',
      ...envdNodeFlags,
      '/.paddock/envd/main.cjs',
      '--listen-fd',
      '3',
    ]);
  });

  test('run on the host with an empty environment, envd is ready with the code cache its build made', async () => {
    const [program, ...args] = envdCommand({ root: envdSandboxDir, args: ['--port', '0'] });
    const child = spawn(program!, args, { stdio: ['ignore', 'ignore', 'pipe'], env: {} });
    try {
      const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const lines: string[] = [];
        createInterface({ input: child.stderr! }).on('line', (line) => {
          lines.push(line);
          if (line.includes('"msg":"ready"')) resolve(JSON.parse(line) as Record<string, unknown>);
        });
        child.once('exit', (code) => reject(new Error(`envd exited with ${code}:\n${lines.join('\n')}`)));
      });
      expect(ready.codeCache).toBe('accepted');
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('an --env that is not NAME=VALUE is refused, naming it', () => {
    const [program, ...args] = envdCommand({ root: envdSandboxDir, args: ['--env', 'NO_VALUE'] });
    const r = spawnSync(program!, args, { encoding: 'utf8', env: {} });
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, "envd: --env 'NO_VALUE' is not NAME=VALUE"]);
  });
});

describe('a scratch image with one static busybox', () => {
  const sandbox = useSandbox('busybox');

  test("commands run with the image's busybox and sh (it has no bash), as root (it has no passwd), with the default PATH and nothing of envd's environment", async () => {
    const r = await sh(sandbox(), 'echo "$PATH|${PADDOCK_TEST_ENVD_ONLY:-}"; id -u; readlink /proc/self/exe; readlink /proc/$$/exe; grep -c paddock /proc/$$/maps || true');
    expect(r).toEqual({ stdout: `${DEFAULT_PATH}|\n0\n/bin/busybox\n/bin/busybox\n0\n`, stderr: '', exitCode: 0 });
  });

  test("envd's root is in a user namespace, host uid ID_SHIFT", async () => {
    const r = await run(sandbox(), '/bin/cat', ['/proc/self/uid_map']);
    expect(r.stdout.trim().split(/\s+/)).toEqual(['0', String(ID_SHIFT), String(ID_RANGE)]);
  });

  test('a user the request names must exist: no fallback to root', async () => {
    await expect(sh(sandbox(), 'id -u', 'user')).rejects.toThrow("user 'user' does not exist");
  });

  test('a terminal runs the image\'s sh', async () => {
    expect(await terminal(sandbox(), 'echo "pty:$((6 * 7))"; exit\n')).toContain('pty:42');
  });

  test('serves files, a listing, a watch and /metrics', () => filesWatchMetrics(sandbox()));
});

describe('a scratch image with no shell at all', () => {
  const sandbox = useSandbox('bare');

  test("a command through the shell fails, saying the image has none; a program is started as asked", async () => {
    await expect(sh(sandbox(), 'echo hi')).rejects.toThrow("cannot start '/bin/bash': this sandbox's image has neither /bin/bash nor /bin/sh");
    expect(await run(sandbox(), '/bin/busybox', ['echo', 'still here'])).toEqual({ stdout: 'still here\n', stderr: '', exitCode: 0 });
  });

  test('serves files, a listing, a watch and /metrics', () => filesWatchMetrics(sandbox()));
});

describe('an Alpine-like musl image, with a read-only /tmp', () => {
  const imagePath = '/usr/local/bin:/usr/bin:/bin:/image/bin';
  const sandbox = useSandbox('musl', ['--env', `PATH=${imagePath}`, '--env', 'IMAGE_VAR=from the image', '--env', 'HOME=/image-home'], [
    { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['ro', 'nosuid', 'nodev'] },
  ]);

  test("commands run as the default user with the image's environment under the user's HOME", async () => {
    const r = await sh(sandbox(), 'echo "$PATH|$IMAGE_VAR|$HOME|${PADDOCK_TEST_ENVD_ONLY:-}"; id -u; touch /tmp/x 2>/dev/null || echo read-only');
    expect(r).toEqual({ stdout: `${imagePath}|from the image|/home/user|\n1000\nread-only\n`, stderr: '', exitCode: 0 });
  });

  test("the image's own program runs with the image's musl, not with envd's libraries", async () => {
    const r = await run(sandbox(), 'maps', []);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toMatch(/ \/lib\/ld-musl-[^ ]+\.so\.1\n/);
    expect(r.stdout).toContain(' /usr/bin/maps\n');
    expect(r.stdout).not.toContain(envdMountPoint);
  });

  test('a terminal runs the image\'s sh as the user', async () => {
    expect(await terminal(sandbox(), 'echo "pty:$(id -u)"; exit\n')).toContain('pty:1000');
  });

  test('serves files, a listing, a watch and /metrics', () => filesWatchMetrics(sandbox()));
});

describe('a glibc image with bash and nothing else', () => {
  const sandbox = useSandbox('glibc');

  test("commands run with the image's bash and glibc, not envd's", async () => {
    const r = await sh(sandbox(), 'echo "$PATH|$HOME|${PADDOCK_TEST_ENVD_ONLY:-}"; maps=$(</proc/$$/maps); case $maps in *' + envdMountPoint + '*) echo "envd\'s files are mapped";; esac; case $maps in */libc.so.6*) echo libc;; esac');
    expect(r).toEqual({ stdout: `${DEFAULT_PATH}|/home/user|\nlibc\n`, stderr: '', exitCode: 0 });
  });

  test('serves files, a listing, a watch and /metrics', () => filesWatchMetrics(sandbox()));
});
