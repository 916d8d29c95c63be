// Sandbox networks on real namespaces, veths and nftables, against a "fake
// internet" this test builds: a namespace of its own holding servers on
// documentation and private addresses, routed from the host through a veth
// that the sandboxes' NAT goes out of. Nothing leaves the machine. Every
// name this test makes starts with its run's prefix; afterAll removes them
// all, whatever happened.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxNetworks, type AddressRules, type SandboxNetwork, type SandboxNetworksOptions } from '../src/network/index.js';
import { sh, Watched } from '../../../tools/testing/fake-internet.mjs';

if (process.getuid?.() !== 0) throw new Error('the network tests make namespaces, veths and nftables tables: run them as root');

const rand = (n: number) => Math.floor(Math.random() * n);
const RUN = `pt${Math.random().toString(36).slice(2, 7).padEnd(5, '0')}`;
const INET_NS = `${RUN}-inet`;
const INET_LINK = `${RUN}i`;
// The fake internet's addresses: one /30 for the link, and servers on /32s.
// The link's /30 lies in .64-.199 and A in .200-.249: A is never an address
// of the link (a CI run drew k = 54 and A = .219, the link's broadcast, and
// every test that reached A timed out), and the host's route to the /30 comes
// before A's /32 in its table, as the subnet clash test's message expects.
const k = 16 + rand(34);
const TRANSIT_HOST = `198.51.100.${4 * k + 1}`;
const TRANSIT_INET = `198.51.100.${4 * k + 2}`;
const A = `198.51.100.${200 + rand(50)}`;
const B = `203.0.113.${10 + rand(100)}`;
const C = `203.0.113.${120 + rand(100)}`;
const PRIVATE_CLOSED = `10.${100 + rand(50)}.${rand(250)}.${1 + rand(250)}`;
const PRIVATE_OPEN = `192.168.${rand(250)}.${1 + rand(250)}`;
const SUBNET_AT = `10.${160 + rand(40)}.${16 * rand(16)}`;
const SUBNET = `${SUBNET_AT}.0/21`;
const WEB = 80;
const HOLD = 7000;

const work = mkdtempSync(join(tmpdir(), 'paddock-net-'));
const PROBE = join(work, 'probe.mjs');
writeFileSync(
  PROBE,
  `import dgram from 'node:dgram';
import net from 'node:net';
const [mode, ...a] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
if (mode === 'serve') {
  for (const port of a.map(Number)) {
    net.createServer((s) => {
      const peer = s.remoteAddress + ':' + s.remotePort;
      out({ event: 'accepted', port, peer });
      s.on('data', () => s.end('hello from ' + s.localAddress + ':' + port));
      s.on('error', (e) => out({ event: 'closed', port, peer, code: e.code }));
      s.on('close', (hadError) => { if (!hadError) out({ event: 'closed', port, peer, code: 'end' }); });
    }).listen(port, '0.0.0.0', () => out({ event: 'listening', port }));
    dgram.createSocket('udp4').on('message', (m) => out({ event: 'udp', port, data: String(m) })).bind(port, '0.0.0.0');
  }
} else if (mode === 'udp') {
  const [host, port, payload, localAddress] = a;
  const s = dgram.createSocket('udp4');
  s.bind({ port: 0, ...(localAddress ? { address: localAddress } : {}) }, () => s.send(payload, Number(port), host, (err) => { out({ sent: !err, error: err?.code }); s.close(); }));
} else if (mode === 'connect') {
  const [host, port, timeout, localAddress] = a;
  const s = net.connect({ host, port: Number(port), ...(localAddress ? { localAddress } : {}) });
  let data = '';
  const timer = setTimeout(() => { out({ error: 'timeout', data }); process.exit(0); }, Number(timeout));
  s.on('connect', () => s.write('hi'));
  s.on('data', (d) => (data += d));
  s.on('end', () => { clearTimeout(timer); out({ data }); process.exit(0); });
  s.on('error', (e) => { clearTimeout(timer); out({ error: e.code, data }); process.exit(0); });
} else if (mode === 'hold') {
  const [host, port] = a;
  const s = net.connect({ host, port: Number(port) });
  s.on('connect', () => out({ event: 'connected', local: s.localPort }));
  s.on('error', (e) => { out({ event: 'error', code: e.code }); process.exit(0); });
  s.on('close', () => { out({ event: 'close' }); process.exit(0); });
}
`,
);

const children: ChildProcess[] = [];
function inNetns(path: string, args: string[]): Watched {
  const child = spawn('nsenter', [`--net=${path}`, process.execPath, PROBE, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Watched(child);
}

/** Connects from inside a namespace, sends a few bytes and reads the answer: `{ data }` or `{ error }`. */
async function probe(net: SandboxNetwork | string, host: string, port: number, opts: { timeoutMs?: number; from?: string } = {}): Promise<{ data?: string; error?: string }> {
  const path = typeof net === 'string' ? net : net.netnsPath;
  const w = inNetns(path, ['connect', host, String(port), String(opts.timeoutMs ?? 2000), ...(opts.from ? [opts.from] : [])]);
  return (await w.waitFor(() => true, `an answer from ${host}:${port}`, (opts.timeoutMs ?? 2000) + 8000)) as { data?: string; error?: string };
}

const reached = (host: string, port = WEB) => ({ data: `hello from ${host}:${port}` });
/** What the filter answers a refused connection with: a reset, at once. */
const refused = { error: 'ECONNREFUSED', data: '' };

let inet: Watched;
const serviceDatagrams: string[] = [];

async function waitUntil(pred: () => boolean, what: string, ms = 8000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const hostServers: Server[] = [];
const hostSockets: Socket[] = [];
async function listen(host: string, reply: string): Promise<number> {
  const server = createServer((s) => s.on('data', () => s.end(reply)).on('error', () => undefined));
  hostServers.push(server);
  await new Promise<void>((r, j) => server.once('error', j).listen(0, host, () => r()));
  return (server.address() as { port: number }).port;
}

let loopbackPort: number;
let anyPort: number;
let servicePort: number;
let gatewayServicePort: number;
let proxyHttpPort: number;
let proxyTlsPort: number;
let stateDir: string;
let nets: SandboxNetworks;
let options: SandboxNetworksOptions;

beforeAll(async () => {
  await sh('ip', ['netns', 'add', INET_NS]);
  await sh('ip', ['-batch', '-'], [`link add ${INET_LINK} type veth peer name up0 netns ${INET_NS}`, `addr add ${TRANSIT_HOST}/30 dev ${INET_LINK}`, `link set ${INET_LINK} up`].join('\n'));
  await sh(
    'ip',
    ['-n', INET_NS, '-batch', '-'],
    ['link set lo up', `addr add ${TRANSIT_INET}/30 dev up0`, 'link set up0 up', `route add default via ${TRANSIT_HOST}`, ...[A, B, C, PRIVATE_CLOSED, PRIVATE_OPEN].map((a) => `addr add ${a}/32 dev lo`)].join('\n'),
  );
  await sh('ip', ['-batch', '-'], [A, B, C, PRIVATE_CLOSED, PRIVATE_OPEN].map((a) => `route add ${a}/32 via ${TRANSIT_INET} dev ${INET_LINK}`).join('\n'));
  inet = inNetns(`/run/netns/${INET_NS}`, ['serve', String(WEB), String(HOLD)]);
  await inet.waitFor((l) => l.event === 'listening' && l.port === HOLD, 'the fake internet listening');
  await inet.waitFor((l) => l.event === 'listening' && l.port === WEB, 'the fake internet listening');

  loopbackPort = await listen('127.0.0.1', 'host loopback');
  anyPort = await listen('0.0.0.0', 'host any');
  servicePort = await listen(TRANSIT_HOST, 'host service');
  const udpService = createSocket('udp4').on('message', (m) => serviceDatagrams.push(String(m)));
  hostSockets.push(udpService);
  await new Promise<void>((r) => udpService.bind(servicePort, TRANSIT_HOST, () => r()));
  gatewayServicePort = await listen('0.0.0.0', 'gateway service');
  proxyHttpPort = await listen(TRANSIT_HOST, 'proxy http');
  proxyTlsPort = await listen(TRANSIT_HOST, 'proxy tls');

  stateDir = join(work, 'state');
  options = {
    stateDir,
    name: RUN,
    subnet: SUBNET,
    uplink: INET_LINK,
    allowedPrivate: [`${PRIVATE_OPEN}/32`],
    poolSize: 3,
    hostServices: [
      { address: TRANSIT_HOST, tcpPorts: [servicePort, proxyHttpPort, proxyTlsPort], udpPorts: [servicePort] },
      { address: 'gateway', tcpPorts: [gatewayServicePort] },
    ],
  };
  nets = new SandboxNetworks(options);
  await nets.prepare();
  await nets.poolReady();
}, 60_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const s of hostServers) s.close();
  for (const s of hostSockets) s.close();
  try {
    await nets?.removeEverything();
  } finally {
    // Whatever removeEverything missed, by this run's names only.
    await sh('nft', ['delete', 'table', 'inet', RUN]).catch(() => undefined);
    const links = JSON.parse(await sh('ip', ['-j', 'link', 'show'])) as Array<{ ifname: string }>;
    for (const l of links) if (l.ifname.startsWith(RUN)) await sh('ip', ['link', 'del', l.ifname]).catch(() => undefined);
    for (const n of existsSync('/run/netns') ? (await sh('ls', ['/run/netns'])).split('\n') : []) if (n.startsWith(RUN)) await sh('ip', ['netns', 'del', n]).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
}, 60_000);

const open: AddressRules = { allowInternet: true, allowOut: [], denyOut: [] };
let seq = 0;
const newId = () => `${RUN}sbx${seq++}`;

async function withSandbox<T>(rules: AddressRules, fn: (n: SandboxNetwork) => Promise<T>): Promise<T> {
  const id = newId();
  const n = await nets.acquire(id, rules);
  try {
    return await fn(n);
  } finally {
    await nets.release(id);
  }
}

test('a slot is a namespace with a veth, its address and default route, loopback up and the sysctls a user-namespaced root needs', async () => {
  await withSandbox(open, async (n) => {
    expect(n.netnsPath).toBe(`/run/netns/${n.netnsName}`);
    expect(existsSync(n.netnsPath)).toBe(true);
    const addrs = JSON.parse(await sh('ip', ['-n', n.netnsName, '-j', 'addr', 'show'])) as Array<{ ifname: string; operstate: string; addr_info: Array<{ local: string; prefixlen: number; family: string }> }>;
    expect(addrs.find((l) => l.ifname === 'lo')?.addr_info.map((a) => a.local)).toContain('127.0.0.1');
    const eth0 = addrs.find((l) => l.ifname === 'eth0')!;
    expect(eth0.operstate).toBe('UP');
    expect(eth0.addr_info).toEqual([expect.objectContaining({ family: 'inet', local: n.address, prefixlen: 30 })]);
    expect(await sh('ip', ['-n', n.netnsName, 'route', 'show', 'default'])).toContain(`default via ${n.gateway} dev eth0`);
    const sysctl = await sh('nsenter', [`--net=${n.netnsPath}`, 'sysctl', '-n', 'net.ipv4.ip_unprivileged_port_start', 'net.ipv4.ping_group_range', 'net.ipv6.conf.all.disable_ipv6']);
    expect(sysctl.split('\n').map((l) => l.replace(/\s+/g, ' ').trim())).toEqual(['0', '0 2147483647', '1', '']);
    expect(await sh('sysctl', ['-n', 'net.ipv4.ip_forward'])).toBe('1\n');
    expect(nets.get(n.sandboxId)).toEqual(n);
    expect(nets.list().map((x) => x.sandboxId)).toContain(n.sandboxId);
  });
});

test('internet access by default: TCP through NAT out of the uplink', async () => {
  await withSandbox(open, async (n) => {
    expect(await probe(n, A, WEB)).toEqual(reached(A));
    expect(await probe(n, B, WEB)).toEqual(reached(B));
    // The far end sees the host's uplink address, not the sandbox's.
    expect(inet.lines.filter((l) => l.event === 'accepted').at(-1)?.peer).toMatch(new RegExp(`^${TRANSIT_HOST.replaceAll('.', '\\.')}:`));
  });
});

test('allowInternet false: no egress at all, whatever the lists say; host services still answer', async () => {
  await withSandbox({ allowInternet: false, allowOut: [A], denyOut: [] }, async (n) => {
    expect(await probe(n, A, WEB)).toEqual(refused);
    expect(await probe(n, B, WEB)).toEqual(refused);
    expect(await probe(n, TRANSIT_HOST, servicePort)).toEqual({ data: 'host service' });
  });
});

test('allow one IP with deny-all; deny one IP; allowOut beats denyOut', async () => {
  await withSandbox({ allowInternet: true, allowOut: [A], denyOut: ['0.0.0.0/0'] }, async (n) => {
    expect(await probe(n, A, WEB)).toEqual(reached(A));
    expect(await probe(n, B, WEB)).toEqual(refused);
    expect(await probe(n, C, WEB)).toEqual(refused);
  });
  await withSandbox({ allowInternet: true, allowOut: [], denyOut: [B] }, async (n) => {
    expect(await probe(n, B, WEB)).toEqual(refused);
    expect(await probe(n, A, WEB)).toEqual(reached(A));
  });
  await withSandbox({ allowInternet: true, allowOut: [`${B}/32`, C], denyOut: ['203.0.113.0/24'] }, async (n) => {
    expect(await probe(n, B, WEB)).toEqual(reached(B));
    expect(await probe(n, C, WEB)).toEqual(reached(C));
    expect(await probe(n, A, WEB)).toEqual(reached(A));
  });
});

test('setRules replaces the rules live, and an open connection that becomes denied is reset at both ends', async () => {
  await withSandbox(open, async (n) => {
    const since = inet.lines.length;
    const client = inNetns(n.netnsPath, ['hold', B, String(HOLD)]);
    await client.waitFor((l) => l.event === 'connected', 'the held connection');
    const accepted = await inet.waitFor((l) => l.event === 'accepted' && l.port === HOLD, 'the server accepting', 8000, since);
    // The client sends nothing and waits for data: only the cut reaches it.
    const started = performance.now();
    const after = await nets.setRules(n.sandboxId, { allowInternet: true, allowOut: [], denyOut: [B] });
    const tookMs = performance.now() - started;
    expect(after.rules).toEqual({ allowInternet: true, allowOut: [], denyOut: [`${B}/32`] });
    expect(await client.waitFor((l) => l.event === 'error' || l.event === 'close', 'the client seeing the cut', 5000)).toEqual({ event: 'error', code: expect.stringMatching(/^(ECONNABORTED|ECONNRESET)$/) });
    expect(await inet.waitFor((l) => l.event === 'closed' && l.peer === accepted.peer, 'the server seeing the cut', 5000, since)).toMatchObject({ code: 'ECONNRESET' });
    expect(await probe(n, B, WEB)).toEqual(refused);
    expect(await probe(n, A, WEB)).toEqual(reached(A));
    // And back: the whole configuration is replaced, the deny goes.
    await nets.setRules(n.sandboxId, open);
    expect(await probe(n, B, WEB)).toEqual(reached(B));
    console.log(`setRules (one nft transaction, plus the cut of one connection): ${tookMs.toFixed(1)} ms`);
  });
});

test('the host is out of reach: its loopback services, its addresses on every interface, but for its declared services', async () => {
  const links = JSON.parse(await sh('ip', ['-j', '-4', 'addr', 'show'])) as Array<{ ifname: string; addr_info: Array<{ local: string }> }>;
  const hostAddresses = links.flatMap((l) => l.addr_info.map((a) => a.local)).filter((a) => !a.startsWith('127.'));
  await withSandbox(open, async (n) => {
    // The listeners are up: the host reaches them.
    expect(await probe(`/proc/${process.pid}/ns/net`, n.gateway, anyPort)).toEqual({ data: 'host any' });
    expect(await probe(n, '127.0.0.1', loopbackPort)).toEqual(refused);
    expect(await probe(n, n.gateway, loopbackPort)).toEqual(refused);
    for (const address of [n.gateway, ...hostAddresses]) expect([address, await probe(n, address, anyPort, { timeoutMs: 1500 })]).toEqual([address, refused]);
    expect(await probe(n, TRANSIT_HOST, servicePort)).toEqual({ data: 'host service' });
    expect(await probe(n, n.gateway, gatewayServicePort)).toEqual({ data: 'gateway service' });
    // A 'gateway' service is the sandbox's own gateway only.
    const other = await nets.acquire(newId(), open);
    try {
      expect(await probe(n, other.gateway, gatewayServicePort)).toEqual(refused);
    } finally {
      await nets.release(other.sandboxId);
    }
  });
});

test('another sandbox is out of reach; the host reaches both', async () => {
  await withSandbox(open, async (a) => {
    await withSandbox(open, async (b) => {
      const server = inNetns(b.netnsPath, ['serve', '8080']);
      await server.waitFor((l) => l.event === 'listening', 'a server in sandbox b');
      expect(await probe(`/proc/${process.pid}/ns/net`, b.address, 8080)).toEqual({ data: `hello from ${b.address}:8080` });
      expect(await probe(a, b.address, 8080)).toEqual(refused);
      expect(await probe(a, b.gateway, gatewayServicePort)).toEqual(refused);
      server.child.kill('SIGKILL');
    });
  });
});

test('private ranges are out of reach unless allowedPrivate opens them', async () => {
  await withSandbox(open, async (n) => {
    expect(await probe(n, PRIVATE_CLOSED, WEB)).toEqual(refused);
    expect(await probe(n, PRIVATE_OPEN, WEB)).toEqual(reached(PRIVATE_OPEN));
  });
  // allowedPrivate does not override a sandbox's own rules.
  await withSandbox({ allowInternet: true, allowOut: [], denyOut: ['0.0.0.0/0'] }, async (n) => {
    expect(await probe(n, PRIVATE_OPEN, WEB)).toEqual(refused);
  });
});

/** Sends one UDP datagram from inside a namespace, from a chosen source address if given. */
async function sendUdp(n: SandboxNetwork, host: string, port: number, payload: string, from?: string): Promise<void> {
  const w = inNetns(n.netnsPath, ['udp', host, String(port), payload, ...(from ? [from] : [])]);
  expect(await w.waitFor(() => true, 'the datagram sent')).toEqual({ sent: true });
}

test('a packet whose source is not the sandbox\'s address is dropped, towards the internet and the host services', async () => {
  await withSandbox(open, async (a) => {
    await withSandbox(open, async (b) => {
      // Only root of the host can add an address there; the test plays a sandbox that forges its source.
      await sh('ip', ['-n', a.netnsName, 'addr', 'add', `${b.address}/32`, 'dev', 'eth0']);
      const since = inet.lines.length;
      const tag = Math.random().toString(36).slice(2);
      await sendUdp(a, A, WEB, `forged-${tag}`, b.address);
      await sendUdp(a, A, WEB, `own-${tag}`);
      await inet.waitFor((l) => l.event === 'udp' && l.data === `own-${tag}`, 'the datagram from the sandbox\'s own address', 8000, since);
      await sendUdp(a, TRANSIT_HOST, servicePort, `forged-${tag}`, b.address);
      await sendUdp(a, TRANSIT_HOST, servicePort, `own-${tag}`);
      await waitUntil(() => serviceDatagrams.includes(`own-${tag}`), 'the host service receiving the datagram from the sandbox\'s own address');
      // Both went the same way right before the one that arrived.
      await new Promise((r) => setTimeout(r, 300));
      expect(inet.lines.slice(since).filter((l) => l.event === 'udp').map((l) => l.data)).toEqual([`own-${tag}`]);
      expect(serviceDatagrams.filter((d) => d.endsWith(tag))).toEqual([`own-${tag}`]);
    });
  });
});

test('redirectWeb sends TCP 80 and 443 to a host service, but not what allowOut lets through by address nor other ports', async () => {
  const redirectWeb = { address: TRANSIT_HOST, httpPort: proxyHttpPort, tlsPort: proxyTlsPort };
  await withSandbox({ allowInternet: true, allowOut: [A], denyOut: ['0.0.0.0/0'], redirectWeb }, async (n) => {
    expect(await probe(n, B, 80)).toEqual({ data: 'proxy http' });
    expect(await probe(n, C, 443)).toEqual({ data: 'proxy tls' });
    expect(await probe(n, A, 80)).toEqual(reached(A));
    expect(await probe(n, B, HOLD)).toEqual(refused);
    expect(await probe(n, PRIVATE_CLOSED, 80)).toEqual(refused);
  });
  // To a service on 0.0.0.0, at each sandbox's own gateway.
  await withSandbox({ ...open, redirectWeb: { address: 'gateway', httpPort: gatewayServicePort, tlsPort: gatewayServicePort } }, async (n) => {
    expect(await probe(n, B, 443)).toEqual({ data: 'gateway service' });
  });
  await expect(nets.acquire(newId(), { ...open, redirectWeb: { address: TRANSIT_HOST, httpPort: anyPort, tlsPort: proxyTlsPort } })).rejects.toThrow(`redirectWeb goes to ${TRANSIT_HOST}:${anyPort}, which is not a host service`);
  await expect(nets.acquire(newId(), { ...open, redirectWeb: { address: 'gateway', httpPort: anyPort, tlsPort: anyPort } })).rejects.toThrow(`redirectWeb goes to gateway:${anyPort}, which is not a host service`);
});

test('bad entries are refused naming them, and leave the rules as they were', async () => {
  await expect(nets.acquire(newId(), { ...open, allowOut: ['10.0.0.0/33'] })).rejects.toThrow('allowOut entry "10.0.0.0/33" has a prefix length 33 over 32');
  await expect(nets.acquire(newId(), { ...open, denyOut: ['example.com'] })).rejects.toThrow('denyOut entry "example.com" is not an IP address or CIDR block');
  await expect(nets.acquire(newId(), { ...open, denyOut: ['2001:db8::/129'] })).rejects.toThrow('denyOut entry "2001:db8::/129" has a prefix length 129 over 128');
  await expect(nets.acquire(newId(), { ...open, allowOut: ['1.2.3.4/x'] })).rejects.toThrow('allowOut entry "1.2.3.4/x" has a prefix length "x" that is not a number');
  await expect(nets.acquire(newId(), { ...open, allowOut: ['1.2.3.4 '] })).rejects.toThrow('allowOut entry "1.2.3.4 " is not an IP address or CIDR block');
  expect(() => new SandboxNetworks({ ...options, allowedPrivate: ['192.168.0.0/40'] })).toThrow('allowedPrivate entry "192.168.0.0/40"');
  // A subnet that the host routes elsewhere is refused before anything is made.
  const clash = new SandboxNetworks({ ...options, stateDir: join(work, 'clash'), name: `${RUN}x`, subnet: '198.51.100.0/24' });
  await expect(clash.prepare()).rejects.toThrow(`the sandboxes' subnet 198.51.100.0/24 overlaps the host's route to ${TRANSIT_HOST.replace(/\d+$/, (m) => String(Number(m) - 1))}/30 on ${INET_LINK}`);
  expect(existsSync(join(work, 'clash'))).toBe(false);
  await withSandbox({ allowInternet: true, allowOut: [], denyOut: [A] }, async (n) => {
    await expect(nets.setRules(n.sandboxId, { ...open, denyOut: ['300.1.1.1'] })).rejects.toThrow('"300.1.1.1"');
    expect(nets.get(n.sandboxId)?.rules.denyOut).toEqual([`${A}/32`]);
    expect(await probe(n, A, WEB)).toEqual(refused);
  });
  // Host bits are cleared, not refused.
  await withSandbox({ allowInternet: true, allowOut: [], denyOut: [`${A}/24`] }, async (n) => {
    expect(n.rules.denyOut).toEqual(['198.51.100.0/24']);
  });
});

test('a transaction the kernel refuses leaves the previous rules in force', async () => {
  await withSandbox({ allowInternet: true, allowOut: [], denyOut: [A] }, async (n) => {
    // A chain of this run's reachable from a filter hook: the kernel then
    // refuses any NAT rule in it, as it would refuse any bad rule.
    const table = JSON.parse(await sh('nft', ['-j', 'list', 'map', 'inet', RUN, 'redirects'])) as { nftables: Array<{ map?: { elem?: Array<[{ concat: string[] }, { jump: { target: string } }]> } }> };
    const elem = table.nftables.find((e) => e.map)!.map!.elem!.find(([key]) => key.concat[0] === n.hostInterface && key.concat[1] === n.address)!;
    const natChain = elem[1].jump.target;
    await sh('nft', ['-f', '-'], `add chain inet ${RUN} test_hook { type filter hook output priority 0; policy accept; }\nadd rule inet ${RUN} test_hook meta mark 0x7e57 jump ${natChain}\n`);
    try {
      const redirectWeb = { address: TRANSIT_HOST, httpPort: proxyHttpPort, tlsPort: proxyTlsPort };
      await expect(nets.setRules(n.sandboxId, { allowInternet: true, allowOut: [A], denyOut: [B], redirectWeb })).rejects.toThrow(/nftables refused to apply the network rules of sandbox .*: .*Operation not supported/s);
      expect(nets.get(n.sandboxId)?.rules).toEqual({ allowInternet: true, allowOut: [], denyOut: [`${A}/32`] });
      expect(await probe(n, A, WEB)).toEqual(refused);
      expect(await probe(n, B, WEB)).toEqual(reached(B));
    } finally {
      await sh('nft', ['-f', '-'], `flush chain inet ${RUN} test_hook\ndelete chain inet ${RUN} test_hook\n`);
    }
    await nets.setRules(n.sandboxId, { allowInternet: true, allowOut: [A], denyOut: [B] });
    expect(await probe(n, A, WEB)).toEqual(reached(A));
    expect(await probe(n, B, WEB)).toEqual(refused);
  });
});

test('taking a slot from the pool vs making one, and replacing rules (printed, not asserted)', async () => {
  await nets.poolReady();
  const pooled: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = newId();
    // The refill of the slot taken before runs apart from the timed call.
    await nets.poolReady();
    const t0 = performance.now();
    await nets.acquire(id, open);
    pooled.push(performance.now() - t0);
    ids.push(id);
  }
  const cold = new SandboxNetworks({ ...options, stateDir: join(work, 'cold'), name: `${RUN}c`, subnet: `${SUBNET_AT.replace(/\.\d+$/, (m) => `.${Number(m.slice(1)) + 8}`)}.0/21`, poolSize: 0 });
  await cold.prepare();
  const made: number[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await cold.acquire(newId(), open);
      made.push(performance.now() - t0);
    }
  } finally {
    await cold.removeEverything();
  }
  expect(await cold.leftovers()).toEqual([]);
  const updates: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await nets.setRules(ids[0]!, i % 2 ? open : { allowInternet: true, allowOut: [A, C], denyOut: ['0.0.0.0/0'] });
    updates.push(performance.now() - t0);
  }
  for (const id of ids) await nets.release(id);
  const show = (xs: number[]) => `median ${[...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!.toFixed(1)} ms of [${xs.map((x) => x.toFixed(1)).join(', ')}]`;
  console.log(`acquire from the pool: ${show(pooled)}; without the pool: ${show(made)}; setRules: ${show(updates)}`);
});

test('a refill waits while the host is busy (a create boots) and runs once it is idle', async () => {
  let busy = false;
  const subnet = `${SUBNET_AT.replace(/\.\d+$/, (m) => `.${Number(m.slice(1)) + 8}`)}.0/21`;
  const waiting = new SandboxNetworks({ ...options, stateDir: join(work, 'waiting'), name: `${RUN}w`, subnet, poolSize: 1, idle: () => !busy, refillDelayMs: 10 });
  try {
    await waiting.prepare();
    await waiting.poolReady();
    expect(waiting.pooled()).toBe(1);
    busy = true;
    const id = newId();
    await waiting.acquire(id, open);
    // Ten delays and more: nothing is made while busy, and poolReady does not force it.
    await new Promise((r) => setTimeout(r, 150));
    await waiting.poolReady();
    expect(waiting.pooled()).toBe(0);
    busy = false;
    for (let i = 0; i < 200 && waiting.pooled() < 1; i++) await new Promise((r) => setTimeout(r, 10));
    await waiting.poolReady();
    expect(waiting.pooled()).toBe(1);
    await waiting.release(id);
  } finally {
    await waiting.removeEverything();
  }
  expect(await waiting.leftovers()).toEqual([]);
});

test('a second SandboxNetworks on the same stateDir adopts the handed-out slots, rules and all', async () => {
  const kept = await nets.acquire(newId(), { allowInternet: true, allowOut: [], denyOut: [B] });
  const gone = await nets.acquire(newId(), open);
  await nets.close();
  // The namespace of one goes while no process runs: that sandbox is lost, not adopted.
  await sh('ip', ['netns', 'del', gone.netnsName]);
  // The other loses its veth pair: adopting it makes a new one.
  await sh('ip', ['link', 'del', kept.hostInterface]);
  const next = new SandboxNetworks(options);
  const { adopted, lost } = await next.prepare();
  nets = next;
  expect(adopted).toEqual([kept]);
  expect(lost).toEqual([gone.sandboxId]);
  expect(next.get(kept.sandboxId)).toEqual(kept);
  expect(await probe(kept, B, WEB)).toEqual(refused);
  expect(await probe(kept, A, WEB)).toEqual(reached(A));
  expect(await nets.leftovers()).not.toContain(`interface ${gone.hostInterface}`);
  await next.setRules(kept.sandboxId, open);
  expect(await probe(kept, B, WEB)).toEqual(reached(B));
  await next.poolReady();
  expect(next.pooled()).toBe(3);
  await next.release(kept.sandboxId);
});

test('release leaves nothing of the slot; removeEverything leaves nothing at all', async () => {
  const n = await nets.acquire(newId(), open);
  expect(await nets.leftovers()).toEqual(expect.arrayContaining([`network namespace ${n.netnsPath}`, `interface ${n.hostInterface}`, `nftables table inet ${RUN}`]));
  expect(await nets.release(n.sandboxId)).toBe(true);
  expect(await nets.release(n.sandboxId)).toBe(false);
  expect(existsSync(n.netnsPath)).toBe(false);
  const left = await nets.leftovers();
  expect(left.filter((l) => l.includes(n.netnsName))).toEqual([]);
  const chains = JSON.parse(await sh('nft', ['-j', 'list', 'table', 'inet', RUN])) as { nftables: Array<{ chain?: { name: string } }> };
  // Its chains are gone (pooled slots have theirs, with the default rules, ahead of being handed out).
  const index = n.netnsName.split('-').at(-1);
  expect(chains.nftables.flatMap((e) => (e.chain ? [e.chain.name] : [])).filter((c) => c.startsWith(`s${index}_`))).toEqual([]);
  await nets.setRules(n.sandboxId, open).then(
    () => {
      throw new Error('setRules of a released sandbox worked');
    },
    (err: Error) => expect(err.message).toBe(`sandbox ${n.sandboxId} has no network`),
  );

  await nets.acquire(newId(), open);
  await nets.removeEverything();
  expect(await nets.leftovers()).toEqual([]);
  await expect(sh('nft', ['list', 'table', 'inet', RUN])).rejects.toThrow();
  const links = JSON.parse(await sh('ip', ['-j', 'link', 'show'])) as Array<{ ifname: string }>;
  expect(links.map((l) => l.ifname).filter((l) => l.startsWith(`${RUN}-`))).toEqual([]);
  expect((await sh('ls', ['/run/netns'])).split('\n').filter((x) => x.startsWith(`${RUN}-`) && x !== INET_NS)).toEqual([]);
});
