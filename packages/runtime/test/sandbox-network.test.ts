// Sandboxes on their networks: the runtime gives each a slot, its
// resolv.conf names the runtime's resolver, its rules are enforced from the
// first command (pooled sandboxes included), an update applies live, and a
// restart of the runtime adopts the slots and the domain rules. Traffic goes
// only to a fake internet this test builds (tools/testing/fake-internet.mjs).
import { randomBytes } from 'node:crypto';
import { RuncRuntime } from '../src/index.js';
import { HOLD_PORT, startFakeInternet, type FakeInternet } from '../../../tools/testing/fake-internet.mjs';
import { exec, sharedImages, sleep, spawnDetached, testRuntime, type TestRuntime } from './harness.js';

if (process.getuid?.() !== 0) throw new Error('sandbox networks need root: run the runtime tests as root');

const PREFIX = `rn${randomBytes(3).toString('hex').slice(0, 5)}`;
const A = '198.51.100.131';
const B = '198.51.100.132';
const DNS = '198.51.100.133';
const NAMES = { 'a.example': A, 'also-a.example': A, 'b.example': B, 'x.wild.example': B };

let inet: FakeInternet;
let t: TestRuntime;

beforeAll(async () => {
  inet = await startFakeInternet({ prefix: PREFIX, transit: '198.51.100.124', hosts: [A, B], dns: DNS, names: NAMES });
  t = await testRuntime({ warmPoolSize: 1, network: { uplink: inet.uplink, dns: [DNS], poolSize: 2 } });
}, 120_000);

afterAll(async () => {
  try {
    await t?.teardown();
  } finally {
    await inet?.stop();
  }
}, 120_000);

const curl = (target: string) => `curl -sS -k --max-time 5 ${target} 2>&1; echo " exit=$?"`;

/** Fetches from inside a sandbox: what curl printed and its exit code (7: could not connect, 6: could not resolve). */
async function fetch(id: string, target: string): Promise<{ out: string; exit: number }> {
  const r = await exec(t.runtime, id, curl(target));
  const m = / exit=(\d+)\s*$/.exec(r.stdout);
  return { out: r.stdout.replace(/ exit=\d+\s*$/, ''), exit: Number(m?.[1]) };
}

async function sandbox(network?: Parameters<RuncRuntime['create']>[0]['network'], cold = true): Promise<string> {
  return (await t.runtime.create({ templateId: 'base', cold, network })).id;
}

test('a sandbox has its own address, a resolver of the runtime, and the internet by default', async () => {
  const id = await sandbox();
  const inside = await exec(t.runtime, id, 'ip -4 -o addr show eth0; cat /etc/resolv.conf; ls /sys/class/net | wc -l');
  expect(inside.stdout).toMatch(/eth0\s+inet 10\.\d+\.\d+\.\d+\/30/);
  expect(inside.stdout).toMatch(/nameserver 10\.\d+\.\d+\.\d+/);
  // The host's interfaces (other sandboxes' among them) are masked.
  expect(inside.stdout.trim().split('\n').at(-1)).toBe('0');
  expect(await fetch(id, 'http://a.example/')).toEqual({ out: `http ${A} host=a.example`, exit: 0 });
  expect(await fetch(id, 'https://b.example/')).toEqual({ out: `https ${B} sni=b.example`, exit: 0 });
  // envd answers programs inside on its port, as in E2B's sandboxes; another sandbox cannot reach it.
  expect(await fetch(id, '-o /dev/null -w %{http_code} http://localhost:49983/health')).toEqual({ out: '204', exit: 0 });
  const address = (await exec(t.runtime, id, "ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1")).stdout.trim();
  const other = await sandbox();
  expect(await fetch(other, `http://${address}:49983/health`)).toMatchObject({ exit: 7 });
  await t.runtime.destroy(other);
  // Its root cannot change its own network: the namespace is the host's.
  const change = await exec(t.runtime, id, 'ip addr add 10.1.2.3/32 dev eth0; echo "exit=$?"');
  expect(change.stdout).toContain('exit=2');
  expect(change.stderr).toContain('Operation not permitted');
  await t.runtime.destroy(id);
});

test('domain rules: allowed names over HTTP and HTTPS, a wildcard, and a name sharing an allowed name\'s address stays denied', async () => {
  const id = await sandbox({ allowOut: ['a.example', '*.wild.example'], denyOut: ['0.0.0.0/0'] });
  expect(await fetch(id, 'http://a.example/')).toEqual({ out: `http ${A} host=a.example`, exit: 0 });
  expect(await fetch(id, 'https://a.example/')).toEqual({ out: `https ${A} sni=a.example`, exit: 0 });
  expect(await fetch(id, 'https://x.wild.example/')).toEqual({ out: `https ${B} sni=x.wild.example`, exit: 0 });
  // A name the rules do not allow, at an allowed name's address: denied
  // by name at the proxy, with a 403 naming it over HTTP and an
  // access_denied alert over TLS; an address alone names nothing allowed.
  expect((await fetch(id, `--resolve also-a.example:80:${A} http://also-a.example/`)).out).toContain('egress to also-a.example refused');
  expect(await fetch(id, `--resolve also-a.example:443:${A} https://also-a.example/`)).toMatchObject({ exit: 35 });
  expect(await fetch(id, `https://${A}/`)).toMatchObject({ exit: 35 });
  // The resolver does not answer names the sandbox may not reach.
  expect(await fetch(id, 'https://b.example/')).toMatchObject({ exit: 6 });
  expect(await fetch(id, 'http://also-a.example/')).toMatchObject({ exit: 6 });
  // Other ports are judged by address only.
  expect(await fetch(id, `http://${A}:${HOLD_PORT}/`)).toMatchObject({ exit: 7 });
  await t.runtime.destroy(id);
});

test('an update applies live and cuts an open connection it denies; a stop and start keeps the rules', async () => {
  const id = await sandbox();
  const since = inet.events.lines.length;
  await spawnDetached(t.runtime, id, `exec 3<>/dev/tcp/${B}/${HOLD_PORT}; cat <&3 > /tmp/held; echo "ended $?" >> /tmp/held`);
  const held = await inet.events.waitFor((l) => l.event === 'held' && l.host === B, 'the held connection', 8000, since);
  await t.runtime.updateNetwork(id, { denyOut: [B] });
  const closed = await inet.events.waitFor((l) => l.event === 'closed' && l.peer === held.peer, 'the cut', 8000, since);
  expect(closed.code).toBe('ECONNRESET');
  for (let i = 0; i < 50 && !(await exec(t.runtime, id, 'cat /tmp/held')).stdout.includes('ended'); i++) await sleep(100);
  expect((await exec(t.runtime, id, 'cat /tmp/held')).stdout).toMatch(/holding\s+ended/);
  expect(await fetch(id, `http://${B}/`)).toMatchObject({ exit: 7 });
  expect(await fetch(id, `http://${A}/`)).toEqual({ out: `http ${A} host=${A}`, exit: 0 });
  await t.runtime.stop(id);
  await t.runtime.start(id);
  expect(await fetch(id, `http://${B}/`)).toMatchObject({ exit: 7 });
  expect(await fetch(id, `http://${A}/`)).toEqual({ out: `http ${A} host=${A}`, exit: 0 });
  await expect(t.runtime.updateNetwork(id, { denyOut: ['example.com'] })).rejects.toThrow('denyOut entry "example.com" is not an IP address or CIDR block');
  await expect(t.runtime.updateNetwork(id, { allowOut: ['a.*.example'] })).rejects.toThrow('allowOut entry "a.*.example" is not a CIDR block, an IP address or a domain name');
  await t.runtime.destroy(id);
}, 60_000);

test('a pooled sandbox has the default rules, and its claim gives it its caller\'s', async () => {
  await t.runtime.poolReady();
  const [pooled] = t.runtime.pooled().base ?? [];
  expect(pooled).toBeDefined();
  expect(await fetch(pooled!, `http://${A}/`)).toEqual({ out: `http ${A} host=${A}`, exit: 0 });
  const id = await sandbox({ denyOut: [A] }, false);
  expect(id).toBe(pooled);
  expect(await fetch(id, `http://${A}/`)).toMatchObject({ exit: 7 });
  expect(await fetch(id, `http://${B}/`)).toEqual({ out: `http ${B} host=${B}`, exit: 0 });
  await t.runtime.destroy(id);
  // Claimed with the defaults: still the internet.
  await t.runtime.poolReady();
  const [next] = t.runtime.pooled().base ?? [];
  const open = await sandbox({ allowInternet: true, allowOut: [], denyOut: [] }, false);
  expect(open).toBe(next);
  expect(await fetch(open, `http://${B}/`)).toEqual({ out: `http ${B} host=${B}`, exit: 0 });
  await t.runtime.destroy(open);
}, 60_000);

test('a runtime started again on the same data directory adopts the slots, address and domain rules alike', async () => {
  const id = await sandbox({ allowOut: ['a.example'], denyOut: ['0.0.0.0/0'] });
  await t.runtime.close();
  const again = new RuncRuntime({ dataDir: t.dataDir, ...sharedImages, warmPoolSize: 1, network: { uplink: inet.uplink, dns: [DNS], poolSize: 2 } });
  await again.prepare();
  t.runtime = again;
  expect(await fetch(id, 'http://a.example/')).toEqual({ out: `http ${A} host=a.example`, exit: 0 });
  expect((await fetch(id, `--resolve also-a.example:80:${A} http://also-a.example/`)).out).toContain('egress to also-a.example refused');
  expect(await fetch(id, `http://${B}:${HOLD_PORT}/`)).toMatchObject({ exit: 7 });
  await again.destroy(id);
}, 60_000);
