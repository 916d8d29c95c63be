// What a sandbox cannot see or touch of the host, and the limits that hold it.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ID_SHIFT } from '../src/index.js';
import { clients, exec, sleep, testRuntime, TOKEN, type TestRuntime } from './harness.js';

/** Made on the host AFTER the sandbox started, in places a host's secrets live: none may show inside. */
const marker = `paddock-isolation-${process.pid}-${randomBytes(4).toString('hex')}`;
const lateHostFiles = [`/root/${marker}`, `/etc/${marker}`, `/var/lib/${marker}/secret`, `/tmp/${marker}`];

let t: TestRuntime;
let id: string;

beforeAll(async () => {
  t = await testRuntime({ pidsLimit: 256 });
  id = (await t.runtime.create({ templateId: 'base', limits: { memoryMB: 256 }, init: { accessToken: TOKEN } })).id;
  mkdirSync(`/var/lib/${marker}`, { mode: 0o700 });
  for (const f of lateHostFiles) writeFileSync(f, 'host only\n', { mode: 0o600 });
});
afterAll(async () => {
  for (const f of lateHostFiles) rmSync(f, { force: true });
  rmSync(`/var/lib/${marker}`, { recursive: true, force: true });
  await t.teardown();
});

/** The sandbox's writable layer as the host sees it. */
const upper = (path: string) => join(t.dataDir, 'sandboxes', id, 'disk', 'upper', path);

test('processes: ps shows only the sandbox; envd is pid 1', async () => {
  const res = await exec(t.runtime, id, 'ps -e -o pid=,args=');
  const lines = res.stdout.trim().split('\n').map((l) => l.trim());
  expect(lines[0]).toMatch(/^1 \/\.paddock\/.*main\.cjs /);
  expect(lines.length).toBeLessThan(10);
  expect(res.stdout).not.toContain('jest');
  expect(res.stdout).not.toContain(String(process.pid));
});

test('envd, as pid 1, collects orphaned processes once they exit', async () => {
  // The subshell exits at once, so its `sleep` children are handed to pid 1.
  // Each may not have exec'd sleep yet when the subshell is gone (ps then
  // shows it as bash): ps is asked again, a bounded number of times.
  const orphaned = await exec(
    t.runtime,
    id,
    "(sleep 1 & sleep 1 &); for i in $(seq 50); do n=$(ps -e -o ppid=,comm= | grep -c '^ *1 sleep$'); [ \"$n\" = 2 ] && break; sleep 0.01; done; echo $n",
  );
  expect(orphaned.stdout.trim()).toBe('2');
  let zombies = '';
  for (let i = 0; i < 100; i++) {
    await sleep(100);
    const ps = await exec(t.runtime, id, 'ps -e -o stat=,comm=');
    zombies = ps.stdout.split('\n').filter((l) => l.trim().startsWith('Z')).join('\n');
    if (!ps.stdout.includes('sleep') && zombies === '') break;
  }
  expect(zombies).toBe('');
});

test('the hostname is the sandbox id', async () => {
  expect((await exec(t.runtime, id, 'hostname')).stdout).toBe(`${id}\n`);
});

test('writes to /usr and /etc stay in the sandbox', async () => {
  const res = await exec(t.runtime, id, `echo hi > /usr/${marker} && echo hi > /etc/${marker}.w && cat /usr/${marker}`, { user: 'root' });
  expect(res).toMatchObject({ exitCode: 0, stdout: 'hi\n' });
  expect(existsSync(`/usr/${marker}`)).toBe(false);
  expect(existsSync(`/etc/${marker}.w`)).toBe(false);
});

test("nothing of the host's own root filesystem is visible: files the host made after the start are not there, nor its data directory", async () => {
  const seen = (path: string) => `test -e ${path} && echo "visible ${path}" || echo hidden`;
  const res = await exec(t.runtime, id, [...lateHostFiles, t.dataDir, '/work', '/var/lib/postgresql'].map(seen).join('; '), { user: 'root' });
  expect(res.stdout.trim().split('\n')).toEqual(Array(lateHostFiles.length + 3).fill('hidden'));
  for (const f of lateHostFiles) expect(existsSync(f)).toBe(true);
  // The sandbox's system is the image's Debian, whatever the host runs.
  expect((await exec(t.runtime, id, '. /etc/os-release; echo $ID $VERSION_CODENAME')).stdout).toBe('debian bookworm\n');
});

test('root inside is an unprivileged id outside: the uid map is not the identity, and a host-owned file within reach stays unreadable', async () => {
  const maps = await exec(t.runtime, id, 'cat /proc/self/uid_map /proc/self/gid_map', { user: 'root' });
  const fields = maps.stdout.trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  expect(fields).toEqual([
    [0, DEFAULT_ID_SHIFT, 65536],
    [0, DEFAULT_ID_SHIFT, 65536],
  ]);
  // Put two files where the sandbox can reach them (its own upper layer):
  // one owned by the host's root, one by the sandbox's root, both 0600.
  // The sandbox makes the directory, so that the overlay has it in the upper
  // layer (files added below a mounted overlay's back show only where it looks them up there).
  expect((await exec(t.runtime, id, `mkdir -m 755 /tmp/${marker}`, { user: 'root' })).exitCode).toBe(0);
  const dir = upper(`tmp/${marker}`);
  expect(lstatSync(dir).isDirectory()).toBe(true);
  writeFileSync(join(dir, 'host-root'), 'host secret\n', { mode: 0o600, flag: 'wx' });
  writeFileSync(join(dir, 'sandbox-root'), 'sandbox file\n', { mode: 0o600, flag: 'wx' });
  execFileSync('chown', [`${DEFAULT_ID_SHIFT}:${DEFAULT_ID_SHIFT}`, join(dir, 'sandbox-root')]);
  const res = await exec(t.runtime, id, `cd /tmp/${marker}; stat -c '%U %a' host-root; cat host-root 2>&1; cat sandbox-root; chmod 644 host-root 2>&1 || echo no-chmod`, { user: 'root' });
  expect(res.stdout).toMatch(/^nobody 600\ncat: host-root: Permission denied\nsandbox file\n.*\nno-chmod\n$/s);
});

test("a sandbox that takes all the inotify instances it may leaves other sandboxes and the host's root theirs", async () => {
  // Opens inotify instances until refused, says how many, and holds them for `hold` seconds.
  const grab = (hold: number) => `python3 - <<'PY'
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
print(len(fds), flush=True)
time.sleep(${hold})
PY`;
  const hostCount = () =>
    Number(execFileSync('python3', ['-c', 'import ctypes\nl = ctypes.CDLL(None)\nn = 0\nwhile n < 1000 and l.inotify_init() >= 0: n += 1\nprint(n)'], { encoding: 'utf8' }).trim());
  const other = (await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })).id;
  const holding = exec(t.runtime, id, grab(8), { user: 'root', timeoutMs: 30_000 });
  // Until the holder has its instances (it prints its count once it has them).
  await sleep(3000);
  const otherCount = Number((await exec(t.runtime, other, grab(0), { user: 'root' })).stdout.trim());
  const host = hostCount();
  expect(Number((await holding).stdout.trim())).toBe(128);
  expect(otherCount).toBe(128);
  expect(host).toBeGreaterThanOrEqual(128);
  await t.runtime.destroy(other);
});

test('the user `user` exists with uid 1000 and home /home/user; python, python3, node, npm, git, curl and bash run', async () => {
  const res = await exec(
    t.runtime,
    id,
    'id -un; id -u; echo $HOME; python -c "print(6*7)"; python3 -c "print(7*7)"; node -e "console.log(2+3)"; npm --version >/dev/null && echo npm; git --version >/dev/null && echo git; curl --version >/dev/null && echo curl; bash -c "echo bash"',
  );
  expect(res.stdout.split('\n')).toEqual(['user', '1000', '/home/user', '42', '49', '5', 'npm', 'git', 'curl', 'bash', '']);
});

test('as `user`: sudo needs no password and gives root, apt-get runs as root, pip installs a package', async () => {
  const sudo = await exec(t.runtime, id, 'sudo -n id -u && sudo -n apt-get check >/dev/null && echo apt-ok');
  expect(sudo).toMatchObject({ exitCode: 0, stdout: '0\napt-ok\n' });
  // A wheel made in the sandbox (no network needed), installed with pip as `user`.
  const wheel = `python3 - <<'PY'
import zipfile, base64, hashlib
name = 'paddock_probe-1.0-py3-none-any.whl'
files = {'paddock_probe.py': b'ANSWER = 42\\n', 'paddock_probe-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: paddock-probe\\nVersion: 1.0\\n', 'paddock_probe-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}
record = ''.join('%s,sha256=%s,%d\\n' % (n, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode(), len(d)) for n, d in files.items()) + 'paddock_probe-1.0.dist-info/RECORD,,\\n'
with zipfile.ZipFile('/tmp/' + name, 'w') as z:
    for n, d in files.items(): z.writestr(n, d)
    z.writestr('paddock_probe-1.0.dist-info/RECORD', record)
PY
pip install --no-index --quiet /tmp/paddock_probe-1.0-py3-none-any.whl && python -c 'import paddock_probe; print(paddock_probe.ANSWER)'`;
  const pip = await exec(t.runtime, id, wheel);
  expect(pip).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/42\n$/), stderr: '' });
});

test("root's capabilities are Docker's default set, nothing more", async () => {
  // Bit numbers from linux/capability.h.
  const bits = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, SETPCAP: 8, NET_BIND_SERVICE: 10, NET_RAW: 13, SYS_CHROOT: 18, MKNOD: 27, AUDIT_WRITE: 29, SETFCAP: 31 };
  const expected = Object.values(bits).reduce((m, b) => m | (1n << BigInt(b)), 0n);
  const res = await exec(t.runtime, id, 'grep -E "^Cap(Eff|Bnd|Prm):" /proc/self/status', { user: 'root' });
  const caps = Object.fromEntries(res.stdout.trim().split('\n').map((l) => l.split(/:\s+/)).map(([k, v]) => [k, BigInt(`0x${v}`)]));
  expect(caps).toEqual({ CapPrm: expected, CapEff: expected, CapBnd: expected });
});

test('root cannot remount the root filesystem, mount anything, use a device node, or write its own cgroup limits', async () => {
  const res = await exec(
    t.runtime,
    id,
    `try() { "$@" >/dev/null 2>&1 && echo "allowed: $*" || echo "refused: $*"; }
     try mount -o remount,rw /
     try mount -t tmpfs none /mnt
     try mount --bind /usr /mnt
     disk=$(awk '$4 ~ /^[sv]d[a-z]$|^nvme[0-9]n[0-9]$/ {print $1" "$2; exit}' /proc/partitions)
     mknod /tmp/disk b \${disk:-8 0} 2>/dev/null; try head -c 512 /tmp/disk
     try head -c 1 /dev/mem
     for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max; do [ -e "$f" ] && try sh -c "echo max > $f"; done
     exit 0`,
    { user: 'root' },
  );
  const lines = res.stdout.trim().split('\n');
  expect(lines.length).toBeGreaterThanOrEqual(7);
  expect(lines.filter((l) => !l.startsWith('refused: '))).toEqual([]);
});

describe('network', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((s) => s.end('host'));
    await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => server.close());

  test('the host cannot be reached, neither on 127.0.0.1 nor at the gateway nor on its own addresses', async () => {
    const hostAddrs = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4' && !a.internal)
      .map((a) => a!.address);
    // One route out: through the host's end of its veth.
    const routes = (await exec(t.runtime, id, 'ip -4 route')).stdout.trim().split('\n').map((l) => l.trim());
    expect(routes).toEqual([expect.stringMatching(/^default via 10\.\d+\.\d+\.\d+ dev eth0$/), expect.stringMatching(/^10\.\d+\.\d+\.\d+\/30 dev eth0 proto kernel scope link src 10\.\d+\.\d+\.\d+$/)]);
    const gateway = routes[0]!.split(' ')[2]!;
    for (const addr of ['127.0.0.1', gateway, ...hostAddrs]) {
      const res = await exec(t.runtime, id, `timeout 3 bash -c 'exec 3<>/dev/tcp/${addr}/${port} && cat <&3' && echo connected || echo refused`);
      expect([addr, res.stdout]).toEqual([addr, expect.stringContaining('refused')]);
      expect(res.stdout).not.toContain('host');
    }
  });
});

test('a memory hog beyond memoryMB is killed by the OOM killer and the sandbox stays usable', async () => {
  // The cgroup's count of processes the OOM killer ended ("oom_kill N").
  const oomKills = async () => {
    const res = await exec(t.runtime, id, 'grep "^oom_kill " /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || grep "^oom_kill " /sys/fs/cgroup/memory.events');
    const m = /^oom_kill (\d+)$/.exec(res.stdout.trim());
    if (!m) throw new Error(`no oom_kill count in the sandbox's memory cgroup: ${JSON.stringify(res)}`);
    return Number(m[1]);
  };
  const before = await oomKills();
  // exec: python itself is the command envd waits for, so its end is reported as it is.
  const hog = await exec(t.runtime, id, 'exec python3 -c "b = bytearray(600 * 1024 * 1024); print(len(b))"');
  expect(hog).toMatchObject({ status: 'signal: killed', stdout: '' });
  expect(await oomKills()).toBe(before + 1);
  const after = await exec(t.runtime, id, 'echo still here; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max');
  expect(after.stdout).toBe(`still here\n${256 * 1024 * 1024}\n`);
});

test('a fork bomb is contained by the pids limit; the host is unaffected', async () => {
  const { proc } = clients(t.runtime, id);
  const bomb = (async () => {
    try {
      for await (const _ of proc.start({ process: { cmd: '/bin/bash', args: ['-c', 'bomb() { bomb | bomb & }; bomb; sleep 30'] }, stdin: false }, { timeoutMs: 4000 })) {
        // The deadline ends it, with everything it spawned.
      }
    } catch {
      // deadline_exceeded
    }
  })();
  await sleep(1500);
  // The host still starts processes while the bomb runs.
  expect(execFileSync('/bin/echo', ['host ok'], { encoding: 'utf8' })).toBe('host ok\n');
  await bomb;
  let ok = '';
  for (let i = 0; i < 50 && ok !== 'usable\n'; i++) {
    await sleep(200);
    ok = (await exec(t.runtime, id, 'echo usable').catch(() => ({ stdout: '' }))).stdout;
  }
  expect(ok).toBe('usable\n');
  const pids = await exec(t.runtime, id, 'cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max');
  expect(pids.stdout).toBe('256\n');
});
