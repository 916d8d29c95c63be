import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, createServer, isIP, type Server, type Socket } from 'node:net';
import * as dnsPacket from 'dns-packet';
import { normalizeAddress, resolvable, type EgressRules } from './rules.js';
import { hostUpstreams, parseUpstream, type Upstream } from './upstreams.js';

export interface SandboxResolverOptions {
  /** The host address the resolver binds (UDP and TCP). */
  readonly address: string;
  /** 53 unless given; 0 picks a port free for both UDP and TCP. */
  readonly port?: number;
  /** Servers asked in order (`address`, `address:port`, `[v6]:port`); the host's by default. */
  readonly upstream?: readonly string[];
  /** The rules of the sandbox at a source address; undefined for an address that is no sandbox's. */
  readonly rulesFor: (sourceAddress: string) => EgressRules | undefined;
  /** How long one upstream server may take to answer before the next is asked. */
  readonly timeoutMs?: number;
  /** Queries forwarded at once; beyond this a query is answered SERVFAIL at once. */
  readonly maxInFlight?: number;
  /** How long a TCP client may stay idle. */
  readonly idleTimeoutMs?: number;
  /** Each refused query, for logs and metrics. */
  readonly onRefused?: (source: string, name: string, reason: string) => void;
}

// Response codes of RFC 1035 4.1.1, set in the low bits of the header flags.
const RCODE = { FORMERR: 1, SERVFAIL: 2, NOTIMP: 4, REFUSED: 5 } as const;

type Query = dnsPacket.DecodedPacket & { opcode?: string };

/**
 * The DNS server the sandboxes' /etc/resolv.conf points at. It answers
 * REFUSED for every name the asking sandbox may not reach (REFUSED rather
 * than NXDOMAIN: the name may well exist, and a negative answer would be
 * cached past a rules change) and forwards the rest to the upstream servers,
 * passing their answers back untouched, TTLs and all.
 */
export class SandboxResolver {
  private readonly opts: SandboxResolverOptions;
  private readonly upstream: Upstream[];
  private udp: UdpSocket | undefined;
  private tcp: Server | undefined;
  private readonly clients = new Set<Socket>();
  private inFlight = 0;
  private boundPort = 0;

  constructor(opts: SandboxResolverOptions) {
    this.opts = opts;
    this.upstream = (opts.upstream ?? hostUpstreams()).map(parseUpstream);
  }

  get address(): string {
    return this.opts.address;
  }

  /** The port both transports listen on (known once started). */
  get port(): number {
    return this.boundPort;
  }

  async start(): Promise<void> {
    const type = isIP(this.opts.address) === 6 ? 'udp6' : 'udp4';
    const wanted = this.opts.port ?? 53;
    // With port 0 the UDP port is picked first and TCP must get the same one.
    for (let attempt = 0; attempt < 10; attempt++) {
      const udp = createSocket(type);
      udp.on('message', (msg, rinfo) => this.onUdp(udp, msg, rinfo.address, rinfo.port));
      await new Promise<void>((resolve, reject) => {
        udp.once('error', (err) => {
          udp.close();
          reject(err);
        });
        udp.bind({ address: this.opts.address, port: wanted }, () => {
          udp.removeAllListeners('error');
          resolve();
        });
      });
      udp.on('error', () => {});
      const port = udp.address().port;
      const tcp = createServer((socket) => this.onTcp(socket));
      const listening = await new Promise<boolean>((resolve, reject) => {
        tcp.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' && wanted === 0 ? resolve(false) : reject(err)));
        tcp.listen({ host: this.opts.address, port }, () => resolve(true));
      }).catch((err: unknown) => {
        udp.close();
        throw err;
      });
      if (!listening) {
        udp.close();
        continue;
      }
      this.udp = udp;
      this.tcp = tcp;
      this.boundPort = port;
      return;
    }
    throw new Error(`no port on ${this.opts.address} was free for both UDP and TCP`);
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.destroy();
    this.clients.clear();
    const udp = this.udp;
    const tcp = this.tcp;
    this.udp = undefined;
    this.tcp = undefined;
    await Promise.all([
      udp && new Promise<void>((resolve) => udp.close(() => resolve())),
      tcp && new Promise<void>((resolve) => tcp.close(() => resolve())),
    ]);
  }

  private onUdp(udp: UdpSocket, msg: Buffer, address: string, port: number): void {
    void this.answer(msg, address, 'udp').then((reply) => {
      if (reply && this.udp === udp) udp.send(reply, port, address);
    });
  }

  private onTcp(socket: Socket): void {
    this.clients.add(socket);
    socket.setTimeout(this.opts.idleTimeoutMs ?? 10000, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.once('close', () => this.clients.delete(socket));
    const source = normalizeAddress(socket.remoteAddress ?? '');
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      // Each message is framed by its 16-bit length (RFC 1035 4.2.2); answers
      // go back as they come, matched by their ids.
      while (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
        const msg = buffer.subarray(2, 2 + buffer.readUInt16BE(0));
        buffer = buffer.subarray(2 + msg.length);
        void this.answer(msg, source, 'tcp').then((reply) => {
          if (reply && !socket.destroyed) socket.write(frame(reply));
        });
      }
    });
  }

  /** The reply to one message from a sandbox, or undefined to drop it. */
  private async answer(msg: Buffer, sourceAddress: string, transport: 'udp' | 'tcp'): Promise<Buffer | undefined> {
    let query: Query;
    try {
      query = dnsPacket.decode(msg) as Query;
    } catch {
      return undefined;
    }
    if (query.type !== 'query') return undefined;
    if (query.opcode !== 'QUERY') return reply(query, RCODE.NOTIMP);
    if (query.questions?.length !== 1) return reply(query, RCODE.FORMERR);
    const source = normalizeAddress(sourceAddress);
    const name = query.questions[0]!.name;
    let rules: EgressRules | undefined;
    try {
      rules = this.opts.rulesFor(source);
    } catch {
      rules = undefined;
    }
    const verdict = rules ? resolvable(rules, name) : { allowed: false, reason: 'the source is no sandbox' };
    if (!verdict.allowed) {
      this.opts.onRefused?.(source, name, verdict.reason);
      return reply(query, RCODE.REFUSED);
    }
    if (this.inFlight >= (this.opts.maxInFlight ?? 256)) return reply(query, RCODE.SERVFAIL);
    this.inFlight++;
    try {
      for (const server of this.upstream) {
        const answer = await (transport === 'udp' ? this.viaUdp : this.viaTcp).call(this, server, msg, query);
        if (answer) return answer;
      }
      return reply(query, RCODE.SERVFAIL);
    } finally {
      this.inFlight--;
    }
  }

  private viaUdp(server: Upstream, msg: Buffer, query: Query): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      // A socket of its own per query: a fresh source port, and only the
      // server it is connected to can answer on it.
      const socket = createSocket(isIP(server.host.replace(/%.*$/, '')) === 6 ? 'udp6' : 'udp4');
      let finished = false;
      const done = (answer: Buffer | undefined) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        socket.close();
        resolve(answer);
      };
      const timer = setTimeout(() => done(undefined), this.opts.timeoutMs ?? 2000);
      socket.on('error', () => done(undefined));
      socket.on('message', (answer) => {
        if (answers(answer, query)) done(answer);
      });
      socket.connect(server.port, server.host, () => socket.send(msg));
    });
  }

  private viaTcp(server: Upstream, msg: Buffer, query: Query): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      const socket = connect({ host: server.host, port: server.port });
      let buffer = Buffer.alloc(0);
      let finished = false;
      const done = (answer: Buffer | undefined) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        socket.destroy();
        resolve(answer);
      };
      const timer = setTimeout(() => done(undefined), this.opts.timeoutMs ?? 2000);
      socket.on('error', () => done(undefined));
      socket.on('close', () => done(undefined));
      socket.on('data', (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk]);
        if (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
          const answer = buffer.subarray(2, 2 + buffer.readUInt16BE(0));
          done(answers(answer, query) ? answer : undefined);
        }
      });
      socket.write(frame(msg));
    });
  }
}

/** Whether a message is the answer to a query: a response with its id and its question. */
function answers(msg: Buffer, query: Query): boolean {
  try {
    const a = dnsPacket.decode(msg);
    const q = a.questions?.[0];
    const asked = query.questions![0]!;
    return (
      a.type === 'response' &&
      a.id === query.id &&
      a.questions?.length === 1 &&
      q!.name.toLowerCase() === asked.name.toLowerCase() &&
      q!.type === asked.type &&
      q!.class === asked.class
    );
  } catch {
    return false;
  }
}

function reply(query: Query, rcode: number): Buffer {
  return dnsPacket.encode({
    id: query.id,
    type: 'response',
    flags: ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED) | dnsPacket.RECURSION_AVAILABLE | rcode,
    questions: query.questions?.length === 1 ? query.questions : [],
  });
}

function frame(msg: Buffer): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(msg.length);
  return Buffer.concat([length, msg]);
}
