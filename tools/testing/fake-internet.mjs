// A "fake internet" for tests: a network namespace of the test's own,
// joined to the host by a veth, holding servers on documentation addresses
// (198.51.100.0/24, 203.0.113.0/24) that the host routes to through that
// veth. Each host address serves HTTP on 80 (answering with the address and
// the Host header; /bytes/N answers N zero bytes), HTTPS on 443 with a self-signed certificate (answering
// with the address and the SNI), and TCP on 7000 that holds a connection
// open and reports when it ends; a DNS server answers A queries for the
// given names. Sandbox networks use the veth as their uplink and the DNS
// server as their upstream, so that nothing leaves the machine.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

export const HOLD_PORT = 7000;

/** Runs a command (15 s at most): its stdout, or an error with its stderr. */
export function sh(cmd, args, input) {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: 15_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A process whose JSON lines can be waited for, each wait bounded. */
export class Watched {
  lines = [];
  waiters = [];
  /** Its output ended: every line it wrote is in `lines`. ('exit' may come before the last of them is read.) */
  ended = false;
  constructor(child) {
    this.child = child;
    createInterface({ input: child.stdout })
      .on('line', (l) => {
        this.lines.push(JSON.parse(l));
        for (const w of this.waiters.splice(0)) w();
      })
      .on('close', () => {
        this.ended = true;
        for (const w of this.waiters.splice(0)) w();
      });
  }
  /** The first line from index `since` on that `pred` takes. */
  async waitFor(pred, what, ms = 8000, since = 0) {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.lines.slice(since).find(pred);
      if (hit) return hit;
      if (Date.now() > deadline || this.ended) throw new Error(`no ${what} within ${ms} ms; saw ${JSON.stringify(this.lines)}`);
      await new Promise((r) => {
        const timer = setTimeout(r, Math.max(0, deadline - Date.now()) + 10);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
  }
}

const SERVER = `import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
const config = JSON.parse(process.argv[2]);
const { default: packet } = await import(config.dnsPacket);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const tls = { cert: readFileSync(config.cert), key: readFileSync(config.key) };
const listening = [];
const listen = (server, port, host) => listening.push(new Promise((r) => server.listen(port, host, r)));
for (const host of config.hosts) {
  listen(http.createServer((req, res) => {
    // /bytes/N: N zero bytes, for throughput.
    const n = req.url.startsWith('/bytes/') ? Number(req.url.slice('/bytes/'.length)) : NaN;
    if (!Number.isSafeInteger(n)) return res.end('http ' + host + ' host=' + req.headers.host);
    res.writeHead(200, { 'content-length': n });
    const chunk = Buffer.alloc(1 << 20);
    let left = Number(n);
    const more = () => {
      while (left > 0) {
        const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= part.length;
        if (!res.write(part)) return res.once('drain', more);
      }
      res.end();
    };
    more();
  }), 80, host);
  listen(https.createServer(tls, (req, res) => res.end('https ' + host + ' sni=' + req.socket.servername)), 443, host);
  listen(net.createServer((s) => {
    const peer = s.remoteAddress + ':' + s.remotePort;
    out({ event: 'held', host, peer });
    s.write('holding\\n');
    s.on('error', (e) => out({ event: 'closed', host, peer, code: e.code }));
    s.on('close', (hadError) => { if (!hadError) out({ event: 'closed', host, peer, code: 'end' }); });
  }), ${HOLD_PORT}, host);
}
const dns = dgram.createSocket('udp4');
dns.on('message', (msg, rinfo) => {
  let q;
  try { q = packet.decode(msg); } catch { return; }
  const question = q.questions?.[0];
  if (!question) return;
  const name = question.name.toLowerCase();
  out({ event: 'dns', name, from: rinfo.address });
  const address = config.names[name];
  const answers = address && question.type === 'A' ? [{ type: 'A', name: question.name, ttl: 5, data: address }] : [];
  const reply = packet.encode({ id: q.id, type: 'response', flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | (address ? 0 : 3), questions: q.questions, answers });
  dns.send(reply, rinfo.port, rinfo.address);
});
listening.push(new Promise((r) => dns.bind(53, config.dns, r)));
await Promise.all(listening);
out({ event: 'ready' });
`;

/** Starts the fake internet; stop() removes all of it. See fake-internet.d.mts for the options. */
export async function startFakeInternet(o) {
  const ns = `${o.prefix}-inet`;
  const link = `${o.prefix}i`;
  const [a, b, c, d] = o.transit.split('.').map(Number);
  const hostEnd = `${a}.${b}.${c}.${d + 1}`;
  const inetEnd = `${a}.${b}.${c}.${d + 2}`;
  const work = mkdtempSync(join(tmpdir(), 'paddock-inet-'));
  const served = [...new Set([...o.hosts, o.dns])];
  let child;
  const stop = async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await sh('ip', ['link', 'del', link]).catch(() => undefined);
    await sh('ip', ['netns', 'del', ns]).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    await sh('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=fake internet', '-keyout', join(work, 'key.pem'), '-out', join(work, 'cert.pem')]);
    writeFileSync(join(work, 'server.mjs'), SERVER);
    await sh('ip', ['netns', 'add', ns]);
    await sh('ip', ['-batch', '-'], [`link add ${link} type veth peer name up0 netns ${ns}`, `addr add ${hostEnd}/30 dev ${link}`, `link set ${link} up`].join('\n'));
    await sh('ip', ['-n', ns, '-batch', '-'], ['link set lo up', `addr add ${inetEnd}/30 dev up0`, 'link set up0 up', `route add default via ${hostEnd}`, ...served.map((h) => `addr add ${h}/32 dev lo`)].join('\n'));
    await sh('ip', ['-batch', '-'], served.map((h) => `route add ${h}/32 via ${inetEnd} dev ${link}`).join('\n'));
    const config = {
      hosts: o.hosts,
      dns: o.dns,
      names: o.names,
      cert: join(work, 'cert.pem'),
      key: join(work, 'key.pem'),
      dnsPacket: pathToFileURL(createRequire(import.meta.url).resolve('dns-packet')).href,
    };
    child = spawn('nsenter', [`--net=/run/netns/${ns}`, process.execPath, join(work, 'server.mjs'), JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const events = new Watched(child);
    await events.waitFor((l) => l.event === 'ready', 'the fake internet listening', 15_000);
    return { uplink: link, netnsPath: `/run/netns/${ns}`, dns: o.dns, events, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
