// What a sandbox cannot see or touch of the host, and the limits that hold it.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { clients, exec, sleep, testRuntime, TOKEN, type TestRuntime } from './harness.js';

/**
 * The data directory lives outside /tmp (which sandboxes never see), so that
 * only its own mask hides it; /var/lib is not masked, as the directory made
 * beside it shows.
 */
const DATA_PARENT = '/var/lib';
/** Made in the host's /root before the sandbox starts; it must not show inside. */
const rootMarker = `/root/paddock-isolation-${process.pid}-${randomBytes(4).toString('hex')}`;
let besideData: string;

let t: TestRuntime;
let id: string;

beforeAll(async () => {
  writeFileSync(rootMarker, 'host only\n');
  besideData = mkdtempSync(`${DATA_PARENT}/paddock-visible-`);
  t = await testRuntime({ pidsLimit: 256 }, DATA_PARENT);
  id = (await t.runtime.create({ templateId: 'base', limits: { memoryMB: 256 }, init: { accessToken: TOKEN } })).id;
});
afterAll(async () => {
  rmSync(rootMarker, { force: true });
  if (besideData) rmSync(besideData, { recursive: true, force: true });
  await t.teardown();
});

test('processes: ps shows only the sandbox; envd is pid 1', async () => {
  const res = await exec(t.runtime, id, 'ps -e -o pid=,args=');
  const lines = res.stdout.trim().split('\n').map((l) => l.trim());
  expect(lines[0]).toMatch(/^1 \/\.paddock\/node .*envd\/main\.cjs /);
  expect(lines.length).toBeLessThan(10);
  expect(res.stdout).not.toContain('jest');
  expect(res.stdout).not.toContain(String(process.pid));
});

test('envd, as pid 1, collects orphaned processes once they exit', async () => {
  // The subshell exits at once, so its `sleep` children are handed to pid 1.
  const orphaned = await exec(t.runtime, id, "(sleep 0.3 & sleep 0.3 &); ps -e -o ppid=,comm= | grep -c '^ *1 sleep$'");
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
  const marker = `paddock-isolation-${process.pid}`;
  const res = await exec(t.runtime, id, `echo hi > /usr/${marker} && echo hi > /etc/${marker} && cat /usr/${marker}`, { user: 'root' });
  expect(res).toMatchObject({ exitCode: 0, stdout: 'hi\n' });
  expect(existsSync(`/usr/${marker}`)).toBe(false);
  expect(existsSync(`/etc/${marker}`)).toBe(false);
});

test('host homes, /root, /tmp and the data directory are not visible', async () => {
  const seen = (path: string) => `test -e ${path} && echo visible || echo hidden`;
  const res = await exec(
    t.runtime,
    id,
    `ls -A /home; echo --; ls -A /root; echo --; ${seen(rootMarker)}; echo --; ls -A /tmp; echo --; ${seen(t.dataDir)}; echo --; ${seen(besideData)}`,
    { user: 'root' },
  );
  const [home, root, marker, tmp, data, beside] = res.stdout.split('--\n');
  expect(home).toBe('user\n');
  // /root is a fresh one with the skeleton files; the host's file is not there.
  expect(root!.split('\n').filter(Boolean).sort()).toEqual(readdirSync('/etc/skel').sort());
  expect(marker).toBe('hidden\n');
  expect(existsSync(rootMarker)).toBe(true);
  expect(tmp).toBe('');
  expect(data).toBe('hidden\n');
  // What hides the data directory is its own mask: its parent is visible.
  expect(t.dataDir.startsWith(`${DATA_PARENT}/`)).toBe(true);
  expect(beside).toBe('visible\n');
  // The host does have entries there that the sandbox does not see.
  expect(readdirSync('/tmp').length).toBeGreaterThan(0);
});

test('the user `user` exists with uid 1000 and home /home/user; python3, node, git and bash run', async () => {
  const res = await exec(t.runtime, id, 'id -un; id -u; echo $HOME; python3 -c "print(6*7)"; node -e "console.log(2+3)"; git --version >/dev/null && echo git; bash -c "echo bash"');
  expect(res.stdout.split('\n')).toEqual(['user', '1000', '/home/user', '42', '5', 'git', 'bash', '']);
});

test("root's capabilities are Docker's default set, nothing more", async () => {
  // Bit numbers from linux/capability.h.
  const bits = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, SETPCAP: 8, NET_BIND_SERVICE: 10, NET_RAW: 13, SYS_CHROOT: 18, MKNOD: 27, AUDIT_WRITE: 29, SETFCAP: 31 };
  const expected = Object.values(bits).reduce((m, b) => m | (1n << BigInt(b)), 0n);
  const res = await exec(t.runtime, id, 'grep -E "^Cap(Eff|Bnd|Prm):" /proc/self/status', { user: 'root' });
  const caps = Object.fromEntries(res.stdout.trim().split('\n').map((l) => l.split(/:\s+/)).map(([k, v]) => [k, BigInt(`0x${v}`)]));
  expect(caps).toEqual({ CapPrm: expected, CapEff: expected, CapBnd: expected });
});

test('root cannot remount the root filesystem or the host view, use a device node, or write its own cgroup limits', async () => {
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

  test('the host cannot be reached, neither on 127.0.0.1 nor on its own addresses', async () => {
    const hostAddrs = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4' && !a.internal)
      .map((a) => a!.address);
    for (const addr of ['127.0.0.1', ...hostAddrs]) {
      const res = await exec(t.runtime, id, `timeout 3 bash -c 'exec 3<>/dev/tcp/${addr}/${port} && cat <&3' && echo connected || echo refused`);
      expect(res.stdout).toContain('refused');
      expect(res.stdout).not.toContain('host');
    }
    const routes = await exec(t.runtime, id, 'ip -4 route 2>/dev/null; cat /proc/net/route | tail -n +2');
    expect(routes.stdout.trim()).toBe('');
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
