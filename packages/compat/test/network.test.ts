// Sandbox egress rules through the official e2b SDK, enforced: every rule
// of the interface description shown with curl from inside a sandbox
// against a fake internet this suite builds (tools/testing/fake-internet.mjs):
// servers on documentation addresses in a namespace of the test's own,
// which the server's sandboxes reach through it as their uplink. No traffic
// leaves the machine.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Sandbox } from 'e2b';
import { HOLD_PORT, startFakeInternet, type FakeInternet } from '../../../tools/testing/fake-internet.mjs';
import { startForE2b, type CompatServer } from './harness.js';

if (process.getuid?.() !== 0) throw new Error('the network suite makes namespaces, veths and nftables tables: run it as root');

const PREFIX = `cn${randomBytes(3).toString('hex').slice(0, 5)}`;
const A = '203.0.113.71';
const B = '203.0.113.72';
const C = '198.51.100.73';
const DNS = '203.0.113.53';
const NAMES = { 'api.example': A, 'mirror.example': A, 'other.example': B, 'cdn.files.example': C, 'deep.cdn.files.example': C };

let inet: FakeInternet;
let c: CompatServer;
let hostService: Server;
let hostServicePort: number;
const sandboxes: Sandbox[] = [];

beforeAll(async () => {
  inet = await startFakeInternet({ prefix: PREFIX, transit: '203.0.113.64', hosts: [A, B, C], dns: DNS, names: NAMES });
  c = await startForE2b({ uplink: inet.uplink, dns: [DNS] });
  // A service on every address of the host, which no sandbox may reach.
  hostService = createServer((s) => s.end('host service\n'));
  await new Promise<void>((r) => hostService.listen(0, '0.0.0.0', r));
  hostServicePort = (hostService.address() as { port: number }).port;
}, 180_000);

afterAll(async () => {
  try {
    for (const s of sandboxes) await s.kill().catch(() => undefined);
    hostService?.close();
    await c?.teardown();
  } finally {
    await inet?.stop();
  }
}, 120_000);

async function create(opts: Parameters<typeof Sandbox.create>[1] = {}): Promise<Sandbox> {
  const sbx = await Sandbox.create('base', opts);
  sandboxes.push(sbx);
  return sbx;
}

/** curl from inside: its output and exit code (7: could not connect, 6: could not resolve, 35: TLS refused). */
async function fetch(sbx: Sandbox, target: string): Promise<{ out: string; exit: number }> {
  const r = await sbx.commands.run(`curl -sS -k --max-time 5 ${target} 2>&1; echo " exit=$?"`);
  const m = / exit=(\d+)\s*$/.exec(r.stdout);
  return { out: r.stdout.replace(/ exit=\d+\s*$/, ''), exit: Number(m?.[1]) };
}

const ok = (host: string, name = host) => ({ out: `http ${host} host=${name}`, exit: 0 });
const refused = { exit: 7 };

test('internet access by default', async () => {
  const sbx = await create();
  expect(await fetch(sbx, `http://${A}/`)).toEqual(ok(A));
  expect(await fetch(sbx, 'http://api.example/')).toEqual(ok(A, 'api.example'));
  expect(await fetch(sbx, 'https://other.example/')).toEqual({ out: `https ${B} sni=other.example`, exit: 0 });
});

test('allow an IP with deny-all; deny an IP; allow beats deny', async () => {
  const allowOne = await create({ network: { allowOut: [A], denyOut: ['0.0.0.0/0'] } });
  expect(await fetch(allowOne, `http://${A}/`)).toEqual(ok(A));
  expect(await fetch(allowOne, `http://${B}/`)).toMatchObject(refused);
  const denyOne = await create({ network: { denyOut: [B] } });
  expect(await fetch(denyOne, `http://${B}/`)).toMatchObject(refused);
  expect(await fetch(denyOne, `http://${A}/`)).toEqual(ok(A));
  const both = await create({ network: { allowOut: [`${A}/32`], denyOut: ['203.0.113.0/24'] } });
  expect(await fetch(both, `http://${A}/`)).toEqual(ok(A));
  expect(await fetch(both, `http://${B}/`)).toMatchObject(refused);
});

test('an update denies a reachable IP and cuts an open connection to it; omitted fields clear the rules', async () => {
  const sbx = await create();
  const since = inet.events.lines.length;
  await sbx.commands.run(`exec 3<>/dev/tcp/${B}/${HOLD_PORT}; cat <&3 > /tmp/held; echo "ended $?" >> /tmp/held`, { background: true });
  const held = await inet.events.waitFor((l) => l.event === 'held' && l.host === B, 'the held connection', 10_000, since);
  await sbx.updateNetwork({ denyOut: [B] });
  const closed = await inet.events.waitFor((l) => l.event === 'closed' && l.peer === held.peer, 'the cut', 10_000, since);
  expect(closed.code).toBe('ECONNRESET');
  expect(await fetch(sbx, `http://${B}/`)).toMatchObject(refused);
  expect(await fetch(sbx, `http://${A}/`)).toEqual(ok(A));
  // Replaces the whole configuration: what it leaves out is cleared.
  await sbx.updateNetwork({});
  expect(await fetch(sbx, `http://${B}/`)).toEqual(ok(B));
  await sbx.updateNetwork({ allowInternetAccess: false });
  expect(await fetch(sbx, `http://${A}/`)).toMatchObject(refused);
  await sbx.updateNetwork({ allowOut: [A] });
  expect(await fetch(sbx, `http://${A}/`)).toEqual(ok(A));
  expect(await fetch(sbx, `http://${B}/`)).toEqual(ok(B));
}, 60_000);

test('domain and wildcard allows over HTTP and HTTPS; a name sharing an allowed name\'s address stays denied; denied names do not resolve', async () => {
  const sbx = await create({ network: { allowOut: ['api.example', '*.files.example'], denyOut: ['0.0.0.0/0'] } });
  expect(await fetch(sbx, 'http://api.example/')).toEqual(ok(A, 'api.example'));
  expect(await fetch(sbx, 'https://api.example/')).toEqual({ out: `https ${A} sni=api.example`, exit: 0 });
  expect(await fetch(sbx, 'http://cdn.files.example/')).toEqual(ok(C, 'cdn.files.example'));
  expect(await fetch(sbx, 'https://deep.cdn.files.example/')).toEqual({ out: `https ${C} sni=deep.cdn.files.example`, exit: 0 });
  // mirror.example is at api.example's address, and is not allowed.
  expect((await fetch(sbx, `--resolve mirror.example:80:${A} http://mirror.example/`)).out).toContain('egress to mirror.example refused');
  expect(await fetch(sbx, `--resolve mirror.example:443:${A} https://mirror.example/`)).toMatchObject({ exit: 35 });
  // The sandbox's resolver refuses names it may not reach: DNS carries nothing out.
  const since = inet.events.lines.length;
  expect(await fetch(sbx, 'http://other.example/')).toMatchObject({ exit: 6 });
  expect(inet.events.lines.slice(since).some((l) => l.event === 'dns' && l.name === 'other.example')).toBe(false);
  // Other ports are judged by address alone.
  expect(await fetch(sbx, `http://api.example:${HOLD_PORT}/`)).toMatchObject(refused);
}, 60_000);

test('allowInternetAccess false: no egress, no DNS', async () => {
  const sbx = await create({ allowInternetAccess: false });
  expect(await fetch(sbx, `http://${A}/`)).toMatchObject(refused);
  expect(await fetch(sbx, 'http://api.example/')).toMatchObject({ exit: 6 });
});

test('the host, other sandboxes and private ranges are out of reach', async () => {
  const a = await create();
  const b = await create();
  await b.commands.run(`node -e "require('http').createServer((q, r) => r.end('sandbox b')).listen(8080)"`, { background: true });
  const bAddress = (await b.commands.run("ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1")).stdout.trim();
  const gateway = (await a.commands.run("ip route show default | awk '{print $3}'")).stdout.trim();
  // The resolver's address is the host's too: only its DNS and proxy ports answer there.
  const resolver = (await a.commands.run("awk '/^nameserver/ {print $2}' /etc/resolv.conf")).stdout.trim();
  expect(bAddress).toMatch(/^10\./);
  // b serves (to itself), a cannot reach it.
  for (let i = 0; i < 50 && (await fetch(b, 'http://127.0.0.1:8080/')).exit !== 0; i++) await new Promise((r) => setTimeout(r, 100));
  expect(await fetch(b, 'http://127.0.0.1:8080/')).toEqual({ out: 'sandbox b', exit: 0 });
  expect(await fetch(a, `http://${bAddress}:8080/`)).toMatchObject(refused);
  // The host: at the sandbox's gateway and at each of its own addresses.
  const hostAddresses = Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((i) => i.family === 'IPv4').map((i) => i.address);
  for (const address of [gateway, resolver, ...hostAddresses]) expect([address, await fetch(a, `telnet://${address}:${hostServicePort}`)]).toEqual([address, expect.objectContaining(refused)]);
  // The control API at the host's loopback is the sandbox's own loopback.
  expect(await fetch(a, `${c.server.apiUrl}/health`)).toMatchObject(refused);
  // Private and special ranges, cloud metadata included.
  for (const address of ['10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1']) expect([address, await fetch(a, `http://${address}/`)]).toEqual([address, expect.objectContaining(refused)]);
}, 90_000);

test('bad rules are refused naming the entry', async () => {
  await expect(Sandbox.create('base', { network: { denyOut: ['example.com'] } })).rejects.toThrow("denyOut[0] 'example.com' is not a CIDR block or an IP address");
  await expect(Sandbox.create('base', { network: { allowOut: ['10.0.0.0/33'] } })).rejects.toThrow("allowOut[0] '10.0.0.0/33' is not");
  await expect(Sandbox.create('base', { network: { allowOut: ['api.*.example'] } })).rejects.toThrow("allowOut[0] 'api.*.example' is not");
  const sbx = await create({ network: { denyOut: [B] } });
  await expect(sbx.updateNetwork({ denyOut: ['2001:db8::/129'] })).rejects.toThrow("denyOut[0] '2001:db8::/129' is not");
  // The previous rules stay.
  expect(await fetch(sbx, `http://${B}/`)).toMatchObject(refused);
});
