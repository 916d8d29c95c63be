// Attacks from inside a sandbox, as its root, on what the host does with
// the sandbox's files and sockets: planted links must never lead the host
// elsewhere, and the sandbox's disk must hold whatever it writes.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exec, spawnDetached, sleep, testRuntime, TOKEN, type TestRuntime } from './harness.js';

let t: TestRuntime;
let hostDir: string;
let hostSocket: string;
let hostServer: Server;
let hostAnswers = 0;

beforeAll(async () => {
  t = await testRuntime();
  // A root-only service of the host, on a unix socket (0600): what a planted
  // link would lead the host's connections to.
  hostDir = mkdtempSync(join(tmpdir(), 'paddock-host-'));
  hostSocket = join(hostDir, 'secret.sock');
  hostServer = createServer((sock) => {
    hostAnswers++;
    sock.end('HTTP/1.1 200 OK\r\ncontent-length: 11\r\nconnection: close\r\n\r\nhost-secret');
  });
  await new Promise<void>((r) => hostServer.listen(hostSocket, r));
});
afterAll(async () => {
  hostServer?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
  await t.teardown();
});

const create = async (limits?: { diskSizeMB?: number }) => (await t.runtime.create({ templateId: 'base', limits, init: { accessToken: TOKEN } })).id;
const asRoot = (id: string, script: string) => exec(t.runtime, id, script, { user: 'root' });

/** GET `path` from a sandbox's envd over a new connection, as the proxy opens them. */
function envdGet(id: string, path: string): Promise<{ status: number; body: string }> {
  const endpoint = t.runtime.envdEndpoint(id);
  if (!('socketPath' in endpoint)) throw new Error('expected a unix socket endpoint');
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: endpoint.socketPath, path, agent: false, headers: { 'x-access-token': TOKEN } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** What a tunnel to `port` of sandbox `id` answers to one HTTP request, or the error that refused it. */
async function throughTunnel(id: string, port: number): Promise<string> {
  let sock;
  try {
    sock = await t.runtime.openTunnel(id, port);
  } catch (err) {
    return `refused: ${(err as Error).message}`;
  }
  return new Promise((resolve) => {
    let data = '';
    const timer = setTimeout(() => sock.destroy(), 5000);
    sock.on('data', (d: Buffer) => (data += d.toString()));
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(data);
    });
    sock.on('error', () => undefined);
    sock.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  });
}

test("links planted by a sandbox's root never lead the host to a host socket or to another sandbox", async () => {
  const attacker = await create();
  const victim = await create();
  // The victim serves on a port of its own, which only its own tunnel reaches.
  await spawnDetached(t.runtime, victim, 'mkdir -p /tmp/www && cd /tmp/www && echo victim-private > index.html && exec python3 -m http.server 8000 --bind 127.0.0.1');
  let served = '';
  for (let i = 0; i < 100 && !served.includes('victim-private'); i++) {
    await sleep(100);
    served = await throughTunnel(victim, 8000);
  }
  expect(served).toContain('victim-private');

  // Every place where envd's sockets are or were, and every socket the
  // sandbox can see, is replaced by links: to the host's root-only socket
  // and to the victim's tunnel (host paths, which only the host resolves).
  const victimDir = join(t.dataDir, 'sandboxes', victim);
  const victimTunnels = ['sock/tunnel.sock', 'run/tunnel.sock'].map((p) => join(victimDir, p));
  const plant = await asRoot(
    attacker,
    `set -u
     for d in /.paddock/run /.paddock /.paddock/sock /run; do
       mkdir -p "$d" 2>/dev/null || continue
       ln -sfn ${hostSocket} "$d/envd.sock" && ln -sfn ${victimTunnels[0]} "$d/tunnel.sock" && echo "planted in $d"
     done
     find / -xdev -type s 2>/dev/null | while read -r s; do ln -sfn ${hostSocket} "$s" 2>/dev/null && echo "replaced $s"; done
     exit 0`,
  );
  // envd's own directory is a read-only mount: nothing can be planted there at all.
  expect(plant.stdout).toContain('planted in /run');
  expect(plant.stdout).not.toContain('planted in /.paddock');

  // A burst of new connections, as the proxy opens them under load.
  hostAnswers = 0;
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => envdGet(attacker, i % 2 ? '/health' : '/envs')));
  for (const a of answers) expect(a.body).not.toContain('host-secret');
  expect(answers.every((a) => a.status === 204 || a.status === 200)).toBe(true);
  const tunnels = await Promise.all(Array.from({ length: 10 }, () => throughTunnel(attacker, 8000)));
  for (const answer of tunnels) {
    expect(answer).not.toContain('victim-private');
    expect(answer).not.toContain('host-secret');
    expect(answer).toMatch(/nothing is listening on port 8000/);
  }
  expect(hostAnswers).toBe(0);
  // The sandbox still works, on its own envd.
  expect((await asRoot(attacker, 'echo still-here')).stdout).toBe('still-here\n');
  await t.runtime.destroy(attacker);
  await t.runtime.destroy(victim);
});

test("processes a sandbox runs hold none of envd's listening sockets", async () => {
  const id = await create();
  // Descriptors 0-2 of a command are its stdio (socket pairs); anything else
  // it inherited would be envd's.
  const res = await asRoot(id, 'for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && echo "$n $(readlink "$f")"; done; exit 0');
  expect(res.stdout.split('\n').filter((l) => l.includes('socket:'))).toEqual([]);
  await t.runtime.destroy(id);
});

test("a snapshot does not follow a link the sandbox made of its /etc to the host's files", async () => {
  // With a network, /etc holds the resolv.conf mount and cannot be replaced
  // at all; a runtime without networks lets root inside make /etc a link.
  const own = await testRuntime({ network: false, warmPoolSize: 0 });
  const id = (await own.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })).id;
  // A host directory holding files named as the ones a snapshot drops from its copy.
  const victimDir = mkdtempSync(join(tmpdir(), 'paddock-etc-'));
  for (const f of ['hostname', 'hosts']) writeFileSync(join(victimDir, f), 'host file\n');
  try {
    const res = await exec(own.runtime, id, `rm -rf /etc && ln -s ${victimDir} /etc && echo linked`, { user: 'root' });
    expect(res.stdout).toBe('linked\n');
    const template = `snap-${randomBytes(4).toString('hex')}`;
    await own.runtime.snapshot(id, template);
    for (const f of ['hostname', 'hosts']) expect(readFileSync(join(victimDir, f), 'utf8')).toBe('host file\n');
    await own.runtime.destroy(id);
    await own.runtime.deleteTemplate(template);
  } finally {
    rmSync(victimDir, { recursive: true, force: true });
    await own.teardown();
  }
});

test('with a network, root inside cannot replace /etc nor its resolv.conf', async () => {
  const id = await create();
  const res = await asRoot(id, 'rm -rf /etc 2>&1; mv /etc /etc.gone 2>&1; ls -d /etc/resolv.conf; [ -L /etc ] && echo link || echo directory');
  expect(res.stdout).toMatch(/\/etc\/resolv\.conf\ndirectory\n$/);
  await t.runtime.destroy(id);
});

test("a sandbox cannot write more than its disk's size, and df shows that size", async () => {
  const id = await create({ diskSizeMB: 64 });
  const df = await asRoot(id, 'df -B1M --output=size / | tail -1');
  const size = Number(df.stdout.trim());
  expect(size).toBeGreaterThan(40);
  expect(size).toBeLessThanOrEqual(64);

  // What the sandbox's writes take on the host: the blocks of its disk's file
  // (not the host's free space, which every other writer on a busy host moves).
  const diskBlocks = () => statSync(join(t.dataDir, 'sandboxes', id, 'disk.img')).blocks * 512;
  const fill = await asRoot(id, 'dd if=/dev/urandom of=/var/tmp/fill bs=1M count=200 2>&1; sync; exit 0');
  expect(fill.stdout).toContain('No space left on device');
  // The host lost at most the disk's size.
  expect(diskBlocks()).toBeGreaterThan(40 * 1024 * 1024);
  expect(diskBlocks()).toBeLessThanOrEqual(64 * 1024 * 1024);
  // Once room is made, the sandbox writes again.
  const after = await asRoot(id, 'rm /var/tmp/fill && echo ok > /var/tmp/small && cat /var/tmp/small');
  expect(after).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
  await t.runtime.destroy(id);
});

test('files on the disk survive stop and start, and go into snapshots of a stopped sandbox', async () => {
  const id = await create({ diskSizeMB: 128 });
  await asRoot(id, 'echo kept > /home/user/kept.txt');
  await t.runtime.stop(id);
  const template = `snap-${randomBytes(4).toString('hex')}`;
  await t.runtime.snapshot(id, template);
  await t.runtime.start(id, { accessToken: TOKEN });
  expect((await asRoot(id, 'cat /home/user/kept.txt; df -B1M --output=size / | tail -1')).stdout.split('\n')[0]).toBe('kept');
  const copy = (await t.runtime.create({ templateId: template, init: { accessToken: TOKEN } })).id;
  expect((await asRoot(copy, 'cat /home/user/kept.txt')).stdout).toBe('kept\n');
  await t.runtime.destroy(copy);
  await t.runtime.destroy(id);
  await t.runtime.deleteTemplate(template);
});
