// Pause, resume, stop, start, destroy, stats, tunnels, snapshots and adoption
// of real sandboxes.
import { execFileSync } from 'node:child_process';
import { existsSync, lchownSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism, totalmem } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ID_SHIFT, RuncRuntime, RuntimeError } from '../src/index.js';
import { clients, parentCgroupsOnHost, sandboxLeftovers, exec, sharedImages, sleep, spawnDetached, testRuntime, TOKEN, type TestRuntime } from './harness.js';

let t: TestRuntime;
beforeAll(async () => {
  t = await testRuntime();
});
afterAll(() => t.teardown());

/** What a runtime has left besides what it holds while in use (its parent cgroup). */
const create = async () => (await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })).id;
/** The sandbox's writable layer as the host sees it: where its /tmp files land. */
const upperFile = (id: string, path: string) => join(t.dataDir, 'sandboxes', id, 'disk', 'upper', path);

test('pause stops a running counter, resume continues it', async () => {
  const id = await create();
  await spawnDetached(t.runtime, id, 'while true; do echo x >> /tmp/counter; sleep 0.02; done');
  const size = () => (existsSync(upperFile(id, 'tmp/counter')) ? statSync(upperFile(id, 'tmp/counter')).size : 0);
  await sleep(300);
  expect(size()).toBeGreaterThan(0);
  await t.runtime.pause(id);
  expect((await t.runtime.get(id))?.status).toBe('paused');
  const frozen = size();
  await sleep(400);
  expect(size()).toBe(frozen);
  await expect(t.runtime.pause(id)).rejects.toMatchObject({ kind: 'conflict' });
  await t.runtime.resume(id);
  expect((await t.runtime.get(id))?.status).toBe('running');
  await sleep(300);
  expect(size()).toBeGreaterThan(frozen);
  await expect(t.runtime.resume(id)).rejects.toMatchObject({ kind: 'conflict' });
  await t.runtime.destroy(id);
});

const bootId = async (id: string) => (await exec(t.runtime, id, 'cat /proc/sys/kernel/random/boot_id')).stdout.trim();

test('stop keeps the files; start runs a new container on them, a new boot', async () => {
  const id = await create();
  await exec(t.runtime, id, 'echo kept > ~/note.txt; sleep 100 &');
  const firstBoot = await bootId(id);
  expect(firstBoot).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  expect(firstBoot).not.toBe(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  // Read-only, even to the sandbox's root.
  expect((await exec(t.runtime, id, 'echo x > /proc/sys/kernel/random/boot_id', { user: 'root' })).exitCode).not.toBe(0);
  await t.runtime.stop(id);
  expect((await t.runtime.get(id))?.status).toBe('stopped');
  await expect(t.runtime.pause(id)).rejects.toMatchObject({ kind: 'conflict' });
  await t.runtime.start(id, { accessToken: TOKEN });
  expect((await t.runtime.get(id))?.status).toBe('running');
  const res = await exec(t.runtime, id, 'cat ~/note.txt; pgrep -c sleep || true');
  expect(res.stdout).toBe('kept\n0\n');
  const secondBoot = await bootId(id);
  expect(secondBoot).toMatch(/^[0-9a-f-]{36}$/);
  expect(secondBoot).not.toBe(firstBoot);
  await expect(t.runtime.start(id)).rejects.toMatchObject({ kind: 'conflict' });
  await t.runtime.destroy(id);
});

test('a sandbox whose init exits by itself is noticed within seconds and stopped, keeping its files; start runs it again', async () => {
  const id = await create();
  const exited: string[] = [];
  const stopListening = t.runtime.onExit((sandbox) => exited.push(sandbox));
  try {
    await exec(t.runtime, id, 'echo kept > ~/note.txt');
    // As the sandbox's root: envd, its init, ends on SIGTERM.
    await exec(t.runtime, id, 'kill -TERM 1', { user: 'root' }).catch(() => undefined);
    for (let i = 0; i < 100 && !exited.includes(id); i++) await sleep(100);
    expect(exited).toEqual([id]);
    expect((await t.runtime.get(id))?.status).toBe('stopped');
    expect((await sandboxLeftovers(t.runtime)).filter((l) => l.startsWith('mount') && l.includes(id))).toEqual([]);
    await t.runtime.start(id, { accessToken: TOKEN });
    expect((await exec(t.runtime, id, 'cat ~/note.txt')).stdout).toBe('kept\n');
    // A stop asked for is not reported as an exit.
    await t.runtime.stop(id);
    await sleep(1500);
    expect(exited).toEqual([id]);
  } finally {
    stopListening();
  }
  await t.runtime.destroy(id);
});

test('a pooled sandbox whose init exits is removed from the pool', async () => {
  const pooled = await testRuntime({ warmPoolSize: 1 });
  try {
    await pooled.runtime.poolReady();
    const [id] = pooled.runtime.pooled().base!;
    const { proc } = clients(pooled.runtime, id!, 'root');
    // SIGTERM: the kernel keeps from a namespace's init every signal it has no handler for.
    await proc.start({ process: { cmd: '/bin/kill', args: ['-TERM', '1'] } })[Symbol.asyncIterator]().next().catch(() => undefined);
    for (let i = 0; i < 100 && pooled.runtime.pooled().base!.includes(id!); i++) await sleep(100);
    expect(pooled.runtime.pooled().base).not.toContain(id);
  } finally {
    await pooled.teardown();
  }
});

test('a paused sandbox can be stopped and started again', async () => {
  const id = await create();
  await exec(t.runtime, id, 'echo before > ~/f');
  await t.runtime.pause(id);
  await t.runtime.stop(id);
  await t.runtime.start(id, { accessToken: TOKEN });
  expect((await exec(t.runtime, id, 'cat ~/f')).stdout).toBe('before\n');
  await t.runtime.destroy(id);
});

test("a sandbox's envd starts with the code cache of its build (made by the same node, with the same options)", async () => {
  const id = await create();
  const log = readFileSync(join(t.dataDir, 'sandboxes', id, 'envd.log'), 'utf8').split('\n');
  const ready = log.find((l) => l.includes('"msg":"ready"'));
  expect(ready && JSON.parse(ready)).toMatchObject({ codeCache: 'accepted' });
  await t.runtime.destroy(id);
});

test('destroy removes container, mounts, cgroups and directory; unknown ids are fine', async () => {
  const id = await create();
  await t.runtime.destroy(id);
  expect(await t.runtime.get(id)).toBeUndefined();
  expect(existsSync(join(t.dataDir, 'sandboxes', id))).toBe(false);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
  await t.runtime.destroy(id);
  await t.runtime.destroy('no-such-sandbox');
  await expect(t.runtime.pause(id)).rejects.toBeInstanceOf(RuntimeError);
});

/** Live host processes whose command line is `sleep <seconds>`; zombies do not count. */
function hostSleeps(seconds: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8') !== `sleep\0${seconds}\0`) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (!/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))) found.push(Number(entry));
    } catch {
      // gone while we looked
    }
  }
  return found;
}

test('destroy kills every process of a running or paused sandbox, detached ones too', async () => {
  for (const paused of [false, true]) {
    const id = await create();
    // An unusual duration marks this sandbox's sleeps among the host's processes.
    const seconds = `${600 + (Date.now() % 1000)}.${paused ? 1 : 2}`;
    await spawnDetached(t.runtime, id, `setsid sleep ${seconds} & trap '' TERM HUP; sleep ${seconds}`);
    for (let i = 0; hostSleeps(seconds).length < 2; i++) {
      if (i > 200) throw new Error(`the sandbox's sleeps did not start: ${hostSleeps(seconds).length} of 2`);
      await sleep(10);
    }
    if (paused) await t.runtime.pause(id);
    await t.runtime.destroy(id);
    expect(hostSleeps(seconds)).toEqual([]);
    expect(await t.runtime.get(id)).toBeUndefined();
  }
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
});

test("stats report cpu, memory and disk from the cgroup and the sandbox's disk", async () => {
  const id = await create();
  const before = await t.runtime.stats(id);
  await exec(t.runtime, id, 'head -c 5000000 /dev/urandom > ~/blob && sync');
  await exec(t.runtime, id, 'for i in $(seq 1 3000); do :; done');
  const s = await t.runtime.stats(id);
  expect(s.cpuCount).toBe(2);
  expect(s.memTotal).toBe(512 * 1024 * 1024);
  expect(s.memUsed).toBeGreaterThan(1024 * 1024);
  expect(s.memUsed).toBeLessThan(s.memTotal);
  expect(s.cpuUsedPct).toBeGreaterThan(0);
  expect(s.cpuUsedPct).toBeLessThanOrEqual(100);
  expect(s.diskUsed - before.diskUsed).toBeGreaterThan(5_000_000);
  // The disk's size, less what ext4 keeps for itself.
  expect(s.diskTotal).toBeLessThanOrEqual(2048 * 1024 * 1024);
  expect(s.diskTotal).toBeGreaterThan(1900 * 1024 * 1024);
  await t.runtime.destroy(id);
});

test('a tunnel reaches a server listening inside the sandbox', async () => {
  const id = await create();
  await spawnDetached(t.runtime, id, 'cd /tmp && echo served > index.txt && exec python3 -m http.server 8123 --bind 127.0.0.1');
  let body = '';
  for (let i = 0; i < 50 && !body; i++) {
    await sleep(100);
    body = await new Promise<string>((resolve) => {
      t.runtime
        .openTunnel(id, 8123)
        .then((sock) => {
          const req = request({ createConnection: () => sock, path: '/index.txt', headers: { host: 'sandbox' } }, (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d));
            res.on('end', () => resolve(text));
          });
          req.on('error', () => resolve(''));
          req.end();
        })
        .catch(() => resolve(''));
    });
  }
  expect(body).toBe('served\n');
  await expect(t.runtime.openTunnel(id, 9)).rejects.toMatchObject({ kind: 'unavailable' });
  await expect(t.runtime.openTunnel(id, 70000)).rejects.toMatchObject({ kind: 'invalid' });
  await t.runtime.destroy(id);
});

test('limits: cpu quota, memory and unknown templates', async () => {
  const s = await t.runtime.create({ templateId: 'base', limits: { cpuCount: 1, memoryMB: 300 }, init: { accessToken: TOKEN } });
  expect(s.limits).toEqual({ cpuCount: 1, memoryMB: 300, diskSizeMB: 2048 });
  const res = await exec(t.runtime, s.id, 'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d" " -f1 /sys/fs/cgroup/cpu.max');
  expect(res.stdout).toBe('100000\n');
  await t.runtime.destroy(s.id);
  await expect(t.runtime.create({ templateId: 'nope' })).rejects.toMatchObject({ kind: 'not_found' });
  await expect(t.runtime.create({ templateId: 'base', limits: { memoryMB: 16 } })).rejects.toMatchObject({ kind: 'invalid' });
  await expect(t.runtime.create({ templateId: 'base', limits: { diskSizeMB: 10 } })).rejects.toThrow('diskSizeMB 10 must be a whole number of at least 64');
});

test('CPU weights: all sandboxes weigh less than the host around them, and a running one less than one booting', async () => {
  const id = await create();
  // cgroup v2 units (default 100), or v1 shares (default 1024) on a v1 host.
  const weight = (cgroup: string) => {
    for (const [file, scale] of [['/sys/fs/cgroup' + cgroup + '/cpu.weight', 1], ['/sys/fs/cgroup/cpu' + cgroup + '/cpu.shares', 100 / 1024], ['/sys/fs/cgroup/cpu,cpuacct' + cgroup + '/cpu.shares', 100 / 1024]] as const) {
      if (existsSync(file)) return Math.round(Number(readFileSync(file, 'utf8')) * scale);
    }
    throw new Error(`no CPU weight for cgroup ${cgroup}`);
  };
  expect(weight('/paddock')).toBe(25);
  expect(weight(`${t.runtime.cgroupParent}/${id}`)).toBe(12);
  await t.runtime.destroy(id);
});

/** One GET to the sandbox's envd on its socket, as the control plane makes it. */
function envdGet(id: string, path: string, token?: string): Promise<{ status: number; body: string }> {
  const endpoint = t.runtime.envdEndpoint(id);
  if (!('socketPath' in endpoint)) throw new Error('expected a unix socket endpoint');
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: endpoint.socketPath, path, headers: token ? { 'x-access-token': token } : {} }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test("envd's /metrics inside a sandbox reports the sandbox's cpu and memory limits, not the host's", async () => {
  const s = await t.runtime.create({ templateId: 'base', limits: { cpuCount: 1, memoryMB: 300 }, init: { accessToken: TOKEN } });
  // This host has more than 1 cpu and 300 MiB, so the host's figures would not pass.
  expect(availableParallelism()).toBeGreaterThan(1);
  expect(totalmem()).toBeGreaterThan(300 * 1024 * 1024);
  const res = await envdGet(s.id, '/metrics', TOKEN);
  expect(res.status).toBe(200);
  const m = JSON.parse(res.body) as Record<string, number>;
  expect(m).toMatchObject({ cpu_count: 1, mem_total: 300 * 1024 * 1024, mem_total_mib: 300 });
  expect(m.mem_used).toBeGreaterThan(0);
  expect(m.mem_used).toBeLessThan(m.mem_total!);
  expect((await envdGet(s.id, '/metrics')).status).toBe(401);
  await t.runtime.destroy(s.id);
});

test('snapshot: files written in a sandbox are in a new sandbox made from its template', async () => {
  const id = await create();
  await exec(t.runtime, id, 'mkdir -p ~/proj && echo snap > ~/proj/file && echo etc > /tmp/t', { user: 'user' });
  await exec(t.runtime, id, 'echo root-change >> /etc/motd', { user: 'root' });
  const template = await t.runtime.snapshot(id, 'snap-one');
  expect(template).toMatchObject({ id: 'snap-one', parentId: 'base' });
  expect((await t.runtime.get(id))?.status).toBe('running');
  const copy = (await t.runtime.create({ templateId: 'snap-one', init: { accessToken: TOKEN } })).id;
  const res = await exec(t.runtime, copy, 'cat ~/proj/file; tail -1 /etc/motd; hostname; stat -c %U ~/proj/file');
  expect(res.stdout).toBe(`snap\nroot-change\n${copy}\nuser\n`);
  await expect(t.runtime.snapshot(id, 'snap-one')).rejects.toMatchObject({ kind: 'conflict' });
  await expect(t.runtime.deleteTemplate('snap-one')).rejects.toMatchObject({ kind: 'conflict' });
  await expect(t.runtime.deleteTemplate('base')).rejects.toMatchObject({ kind: 'conflict' });
  await t.runtime.destroy(copy);
  await t.runtime.destroy(id);
  await t.runtime.deleteTemplate('snap-one');
  expect(await t.runtime.getTemplate('snap-one')).toBeUndefined();
});

test('a new runtime on the same data directory adopts the sandboxes that exist', async () => {
  const running = await create();
  const paused = await create();
  const stopped = await create();
  await exec(t.runtime, running, 'echo adopted > ~/a');
  await t.runtime.pause(paused);
  await t.runtime.stop(stopped);
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await other.prepare();
  const found = new Map((await other.list()).map((s) => [s.id, s.status]));
  expect(found.get(running)).toBe('running');
  expect(found.get(paused)).toBe('paused');
  expect(found.get(stopped)).toBe('stopped');
  expect((await exec(other, running, 'cat ~/a')).stdout).toBe('adopted\n');
  await other.resume(paused);
  await other.start(stopped, { accessToken: TOKEN });
  for (const id of [running, paused, stopped]) await other.destroy(id);
  await other.close();
});

test('a sandbox made by an older runtime (upper beside it, envd sockets in run/) is stopped on adoption and moved onto a disk when it starts', async () => {
  const id = await create();
  await exec(t.runtime, id, 'echo from-before > ~/old.txt');
  await t.runtime.stop(id);
  // The layout of before: upper/ and work/ in the sandbox's directory, no disk, no sock/.
  const dir = join(t.dataDir, 'sandboxes', id);
  execFileSync('mount', ['-o', 'loop', join(dir, 'disk.img'), join(dir, 'disk')]);
  execFileSync('cp', ['-a', join(dir, 'disk', 'upper'), join(dir, 'upper')]);
  mkdirSync(join(dir, 'work'));
  execFileSync('umount', [join(dir, 'disk')]);
  rmSync(join(dir, 'disk.img'));
  rmSync(join(dir, 'sock'), { recursive: true });
  // ...and from before user namespaces: files owned by host ids, no idShift or lowers in its spec.
  const unshift = (path: string) => {
    const st = lstatSync(path);
    lchownSync(path, st.uid - DEFAULT_ID_SHIFT, st.gid - DEFAULT_ID_SHIFT);
    if (st.isDirectory()) for (const name of readdirSync(path)) unshift(join(path, name));
  };
  unshift(join(dir, 'upper'));
  expect(statSync(join(dir, 'upper/home/user/old.txt')).uid).toBe(1000);
  const { idShift: _shift, lowers: _lowers, ...oldSpec } = JSON.parse(readFileSync(join(dir, 'spec.json'), 'utf8'));
  writeFileSync(join(dir, 'spec.json'), JSON.stringify(oldSpec));
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await other.prepare();
  await other.start(id, { accessToken: TOKEN });
  expect((await exec(other, id, 'cat ~/old.txt; df -B1M --output=size / | tail -1')).stdout.split('\n').slice(0, 2).map((l) => l.trim())).toEqual(['from-before', expect.stringMatching(/^(19|20)\d\d$/)]);
  // Its files are its users' again: `user` inside, the shifted id outside.
  expect((await exec(other, id, 'stat -c %U ~/old.txt && echo more >> ~/old.txt && echo written')).stdout).toBe('user\nwritten\n');
  expect(statSync(join(dir, 'disk/upper/home/user/old.txt')).uid).toBe(DEFAULT_ID_SHIFT + 1000);
  expect(existsSync(join(dir, 'upper'))).toBe(false);
  // Running, but with its sockets where an older runtime had them: the next adoption stops it.
  rmSync(join(dir, 'sock'), { recursive: true });
  await other.close();
  const third = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await third.prepare();
  expect((await third.get(id))?.status).toBe('stopped');
  await third.destroy(id);
  await third.close();
});

test('close keeps the parent cgroup while a sandbox is left for adoption, and removes it once none is', async () => {
  const id = await create();
  const held = parentCgroupsOnHost(t.runtime);
  expect(held.length).toBeGreaterThan(0);
  const first = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await first.prepare();
  await first.close();
  expect(parentCgroupsOnHost(first)).toEqual(held);
  const second = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await second.prepare();
  expect((await exec(second, id, 'echo adopted')).stdout).toBe('adopted\n');
  await second.destroy(id);
  await second.close();
  expect(parentCgroupsOnHost(second)).toEqual([]);
  // The next sandbox of the data directory gets a parent cgroup again.
  const next = await create();
  expect(parentCgroupsOnHost(t.runtime)).toEqual(held);
  await t.runtime.destroy(next);
});

test('leftovers of a crash are cleaned on the next start', async () => {
  const id = await create();
  // A crash in the middle of destroy leaves a tombstone.
  const specFile = join(t.dataDir, 'sandboxes', id, 'spec.json');
  const spec = JSON.parse(readFileSync(specFile, 'utf8'));
  writeFileSync(specFile, JSON.stringify({ ...spec, destroying: true }));
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir });
  await other.prepare();
  expect(existsSync(join(t.dataDir, 'sandboxes', id))).toBe(false);
  expect(await sandboxLeftovers(other)).toEqual([]);
  await other.close();
});

test('removeEverything also removes a sandbox whose removal stopped part-way, and the pooled ones', async () => {
  const own = await testRuntime({ warmPoolSize: 1 });
  try {
    await own.runtime.poolReady();
    const [pooled] = own.runtime.pooled().base!;
    const kept = (await own.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } })).id;
    const stopped = (await own.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } })).id;
    // The tombstone a failed create's cleanup leaves when it fails itself: still running, mounted, and out of list().
    const specFile = join(own.dataDir, 'sandboxes', stopped, 'spec.json');
    writeFileSync(specFile, JSON.stringify({ ...JSON.parse(readFileSync(specFile, 'utf8')), destroying: true }));
    expect((await own.runtime.list()).map((s) => s.id)).toEqual([kept]);
    await own.runtime.removeEverything();
    for (const id of [pooled, kept, stopped]) expect(existsSync(join(own.dataDir, 'sandboxes', id!))).toBe(false);
    expect(await own.runtime.leftovers()).toEqual([]);
  } finally {
    await own.teardown();
  }
});

test('removeEverything waits for a create still booting, destroys that sandbox too, and refuses creates from then on', async () => {
  const own = await testRuntime({ warmPoolSize: 0 });
  try {
    // The boot is under way before the removal starts, and ends after the removal listed the sandboxes.
    const booting = own.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } });
    const removed = own.runtime.removeEverything();
    const late = own.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } });
    await expect(late).rejects.toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/takes no new ones/) });
    const made = await booting;
    await removed;
    expect(existsSync(join(own.dataDir, 'sandboxes', made.id))).toBe(false);
    expect(await own.runtime.leftovers()).toEqual([]);
  } finally {
    await own.teardown();
  }
});
