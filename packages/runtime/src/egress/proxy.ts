import { STATUS_CODES } from 'node:http';
import { connect, createServer, isIP, type AddressInfo, type Server, type Socket } from 'node:net';
import { getExtensionData, readTlsClientHello } from 'read-tls-client-hello';
import { HeadError, hostOf, readHead, requestHost } from './head.js';
import { domainAllowed, judgeAddress, normalizeAddress, type EgressRules } from './rules.js';
import { hostUpstreams, upstreamResolve } from './upstreams.js';

export interface EgressProxyOptions {
  /** The host address both listeners bind. */
  readonly address: string;
  /** Where connections redirected from port 80 arrive; 0 picks a free port. */
  readonly httpPort: number;
  /** Where connections redirected from port 443 arrive; 0 picks a free port. */
  readonly tlsPort: number;
  /** The rules of the sandbox at a source address; undefined for an address that is no sandbox's. */
  readonly rulesFor: (sourceAddress: string) => EgressRules | undefined;
  /**
   * Why an address may never be reached from a sandbox whatever its rules say
   * (the host, other sandboxes, private and special ranges), or undefined.
   */
  readonly blocked: (address: string) => string | undefined;
  /** A name's addresses; by default the host's DNS servers are asked, answers kept for their TTL. */
  readonly resolve?: (name: string) => Promise<string[]>;
  /** The ports connected to upstream; 80 and 443 unless a test serves elsewhere. */
  readonly upstreamPorts?: { readonly http: number; readonly tls: number };
  /** Bounds on what is read before a decision. */
  readonly maxHeadBytes?: number;
  readonly headTimeoutMs?: number;
  /** How long connecting to one upstream address may take; at most `maxAttempts` addresses are tried. */
  readonly connectTimeoutMs?: number;
  readonly maxAttempts?: number;
  /** Connections one sandbox may hold open through the proxy at once; more are closed at once. */
  readonly maxConnectionsPerSource?: number;
  /** Each decision, for logs and metrics. */
  readonly onDecision?: (decision: EgressDecision) => void;
}

export interface EgressDecision {
  readonly source: string;
  readonly protocol: 'http' | 'tls';
  /** The name from Host or SNI; undefined when none could be read. */
  readonly name: string | undefined;
  readonly allowed: boolean;
  /** The upstream address connected to, when allowed. */
  readonly address?: string;
  readonly reason: string;
}

interface Open {
  readonly protocol: 'http' | 'tls';
  readonly client: Socket;
  readonly upstream: Socket;
  readonly name: string;
  readonly address: string;
}

// A fatal access_denied alert (RFC 8446 6.2), sent in the clear as a server
// may before its first handshake message: clients report "access denied"
// rather than a bare connection reset.
/** How long a refused client may take to close its side after the answer. */
const LINGER_MS = 5000;

const TLS_ACCESS_DENIED = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31]);

/**
 * A transparent egress proxy for the sandboxes' TCP ports 80 and 443 (the host
 * redirects them here). It reads the name a connection is for (the first
 * request's Host, or the TLS SNI: never decrypting), judges it by the
 * sandbox's rules, resolves it itself and connects only to addresses that
 * neither the rules nor `blocked` refuse, replays what it read, and then
 * passes bytes both ways untouched.
 */
export class EgressProxy {
  private readonly opts: EgressProxyOptions;
  private readonly resolve: (name: string) => Promise<string[]>;
  private readonly servers: Server[] = [];
  private readonly open = new Map<string, Set<Open>>();
  private readonly clients = new Set<Socket>();
  private readonly perSource = new Map<string, number>();
  private ports = { http: 0, tls: 0 };

  constructor(opts: EgressProxyOptions) {
    this.opts = opts;
    this.resolve = opts.resolve ?? upstreamResolve(hostUpstreams());
  }

  get address(): string {
    return this.opts.address;
  }

  /** The port for redirected port-80 connections (known once started). */
  get httpPort(): number {
    return this.ports.http;
  }

  /** The port for redirected port-443 connections (known once started). */
  get tlsPort(): number {
    return this.ports.tls;
  }

  async start(): Promise<void> {
    const listen = (port: number, handle: (s: Socket, source: string) => Promise<void>) =>
      new Promise<number>((resolve, reject) => {
        // Half-open: a client that shuts down its sending side still gets the answer.
        const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.accept(socket, handle));
        server.once('error', reject);
        server.listen({ host: this.opts.address, port }, () => {
          server.off('error', reject);
          this.servers.push(server);
          resolve((server.address() as AddressInfo).port);
        });
      });
    try {
      const http = await listen(this.opts.httpPort, (s, source) => this.http(s, source));
      const tls = await listen(this.opts.tlsPort, (s, source) => this.tls(s, source));
      this.ports = { http, tls };
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Stops listening and ends every connection, proxied or still being judged. */
  async close(): Promise<void> {
    for (const set of this.open.values()) for (const o of set) o.upstream.destroy();
    for (const c of this.clients) c.destroy();
    this.open.clear();
    this.clients.clear();
    await Promise.all(this.servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  /**
   * Judges the open connections of the sandbox at `sourceAddress` again by
   * its current rules and resets those they no longer allow. Call it after
   * changing that sandbox's rules; returns how many were cut.
   */
  reconsider(sourceAddress: string): number {
    const source = normalizeAddress(sourceAddress);
    const set = this.open.get(source);
    if (!set) return 0;
    let cut = 0;
    for (const o of set) if (!this.stillAllowed(source, o)) cut++;
    return cut;
  }

  /** Resets a proxied connection that the sandbox's current rules no longer allow. */
  private stillAllowed(source: string, o: Open): boolean {
    const rules = this.rulesOf(source);
    if (rules && (domainAllowed(rules, o.name) || judgeAddress(rules, o.address).allowed)) return true;
    o.client.resetAndDestroy();
    o.upstream.resetAndDestroy();
    this.opts.onDecision?.({ source, protocol: o.protocol, name: o.name, allowed: false, reason: 'no longer allowed after a rules change' });
    return false;
  }

  private rulesOf(source: string): EgressRules | undefined {
    try {
      return this.opts.rulesFor(source);
    } catch {
      return undefined;
    }
  }

  private accept(socket: Socket, handle: (s: Socket, source: string) => Promise<void>): void {
    socket.on('error', () => socket.destroy());
    const source = normalizeAddress(socket.remoteAddress ?? '');
    const count = this.perSource.get(source) ?? 0;
    if (!this.rulesOf(source) || count >= (this.opts.maxConnectionsPerSource ?? 1024)) {
      socket.destroy();
      return;
    }
    this.perSource.set(source, count + 1);
    this.clients.add(socket);
    socket.once('close', () => {
      this.clients.delete(socket);
      const left = (this.perSource.get(source) ?? 1) - 1;
      if (left > 0) this.perSource.set(source, left);
      else this.perSource.delete(source);
    });
    handle(socket, source).catch(() => socket.destroy());
  }

  private async http(client: Socket, source: string): Promise<void> {
    let name: string | undefined;
    let bytes: Buffer;
    try {
      const head = await readHead(client, this.opts.maxHeadBytes ?? 16384, this.opts.headTimeoutMs ?? 10000);
      bytes = head.bytes;
      name = requestHost(head.bytes.subarray(0, head.headLength));
    } catch (err) {
      if (!(err instanceof HeadError)) throw err;
      this.opts.onDecision?.({ source, protocol: 'http', name, allowed: false, reason: err.message });
      respond(client, err.status, err.message);
      return;
    }
    const verdict = await this.decide(source, name);
    if (!verdict.allowed) {
      this.opts.onDecision?.({ source, protocol: 'http', name, allowed: false, reason: verdict.reason });
      respond(client, 403, `egress to ${name} refused: ${verdict.reason}`);
      return;
    }
    const upstream = await this.connect(client, verdict.addresses, this.opts.upstreamPorts?.http ?? 80);
    if (upstream === undefined) return;
    if (typeof upstream === 'string') {
      this.opts.onDecision?.({ source, protocol: 'http', name, allowed: false, reason: upstream });
      respond(client, 502, `egress to ${name}: ${upstream}`);
      return;
    }
    this.opts.onDecision?.({ source, protocol: 'http', name, allowed: true, address: upstream.remoteAddress!, reason: verdict.reason });
    // Only the first request's Host is judged: later requests on this
    // connection reach the same upstream address, as the requests inside a
    // TLS connection do, whose Host the proxy never sees.
    this.splice('http', source, name, client, upstream, bytes);
  }

  private async tls(client: Socket, source: string): Promise<void> {
    const timeoutMs = this.opts.headTimeoutMs ?? 10000;
    // The hello is one TLS record, so what is read is bounded by a record's
    // 16-bit length; the timer bounds how long a client may take to send it.
    const timer = setTimeout(() => client.destroy(), timeoutMs);
    let name: string | undefined;
    try {
      const hello = await readTlsClientHello(client);
      const sni = hello.extensions.filter((e) => e.id === 0);
      const serverName = getExtensionData(hello, 'sni')?.serverName;
      name = sni.length === 1 && serverName !== undefined ? hostOf(serverName) : undefined;
    } catch {
      // Not TLS, or not a ClientHello that fits one record.
    } finally {
      clearTimeout(timer);
    }
    if (client.destroyed) return;
    const verdict = name === undefined ? { allowed: false as const, reason: 'no single valid server name in the TLS ClientHello' } : await this.decide(source, name);
    if (!verdict.allowed) {
      this.opts.onDecision?.({ source, protocol: 'tls', name, allowed: false, reason: verdict.reason });
      refuse(client, TLS_ACCESS_DENIED);
      return;
    }
    const upstream = await this.connect(client, verdict.addresses, this.opts.upstreamPorts?.tls ?? 443);
    if (upstream === undefined) return;
    if (typeof upstream === 'string') {
      this.opts.onDecision?.({ source, protocol: 'tls', name, allowed: false, reason: upstream });
      client.resetAndDestroy();
      return;
    }
    this.opts.onDecision?.({ source, protocol: 'tls', name, allowed: true, address: upstream.remoteAddress!, reason: verdict.reason });
    // The hello was put back into the client socket: piping replays it.
    this.splice('tls', source, name!, client, upstream);
  }

  /**
   * Which of a name's addresses this sandbox may reach: all that are not
   * blocked when its name is allowed by domain, else those the IP rules allow.
   * Only addresses resolved here are ever used, never the sandbox's own
   * answer, so a name allowed by domain cannot be pointed elsewhere.
   */
  private async decide(
    source: string,
    name: string,
  ): Promise<{ allowed: true; addresses: string[]; reason: string } | { allowed: false; reason: string }> {
    // The rules as they are once the name is known, not as they were at accept.
    const rules = this.rulesOf(source);
    if (!rules) return { allowed: false, reason: 'the source is no sandbox' };
    if (!rules.allowInternet) return { allowed: false, reason: 'internet access is off for this sandbox' };
    const byDomain = isIP(name) === 0 && domainAllowed(rules, name);
    let addresses: string[];
    if (isIP(name) !== 0) {
      addresses = [name];
    } else {
      try {
        addresses = await this.resolve(name);
      } catch (err) {
        return { allowed: false, reason: `could not resolve it (${(err as { code?: string }).code ?? (err as Error).message})` };
      }
      if (addresses.length === 0) return { allowed: false, reason: 'it has no address' };
    }
    const reasons: string[] = [];
    const ok: string[] = [];
    for (const a of addresses) {
      const why = this.opts.blocked(normalizeAddress(a));
      if (why !== undefined) {
        reasons.push(`${a} is ${why}`);
        continue;
      }
      if (!byDomain) {
        const j = judgeAddress(rules, a);
        if (!j.allowed) {
          reasons.push(`${name} is not in allowOut and ${j.reason}`);
          continue;
        }
      }
      ok.push(a);
    }
    if (ok.length === 0) return { allowed: false, reason: [...new Set(reasons)].join('; ') };
    return { allowed: true, addresses: ok, reason: byDomain ? `${name} is in allowOut` : judgeAddress(rules, ok[0]!).reason };
  }

  /**
   * The first of the addresses that accepts a connection, a string saying why
   * none did, or undefined when the client went away meanwhile.
   */
  private async connect(client: Socket, addresses: readonly string[], port: number): Promise<Socket | string | undefined> {
    const errors: string[] = [];
    for (const host of addresses.slice(0, this.opts.maxAttempts ?? 4)) {
      if (client.destroyed) return undefined;
      const result = await new Promise<Socket | string>((resolve) => {
        const socket = connect({ host, port, allowHalfOpen: true, noDelay: true });
        const fail = (why: string) => {
          socket.destroy();
          resolve(`${host}:${port} ${why}`);
        };
        socket.setTimeout(this.opts.connectTimeoutMs ?? 10000, () => fail('did not answer in time'));
        socket.once('error', (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
        socket.once('connect', () => {
          socket.setTimeout(0);
          socket.removeAllListeners('error');
          resolve(socket);
        });
      });
      if (typeof result !== 'string') {
        if (!client.destroyed) return result;
        result.destroy();
        return undefined;
      }
      errors.push(result);
    }
    return `could not connect: ${errors.join('; ')}`;
  }

  /**
   * Sends `replay` upstream, then passes bytes both ways with back-pressure
   * and half-close; an error or a full close ends both.
   */
  private splice(protocol: 'http' | 'tls', source: string, name: string, client: Socket, upstream: Socket, replay?: Buffer): void {
    const entry: Open = { protocol, client, upstream, name, address: normalizeAddress(upstream.remoteAddress ?? '') };
    // Rules may have changed while the name was resolved and connected to.
    if (!this.stillAllowed(source, entry)) return;
    let set = this.open.get(source);
    if (!set) this.open.set(source, (set = new Set()));
    set.add(entry);
    const end = () => {
      client.destroy();
      upstream.destroy();
      const s = this.open.get(source);
      if (s?.delete(entry) && s.size === 0) this.open.delete(source);
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.once('close', end);
    }
    if (replay) upstream.write(replay);
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

function respond(socket: Socket, status: number, message: string): void {
  const body = `${message}\n`;
  refuse(
    socket,
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}

/** Sends a last answer and closes; a client that does not close its side in time is cut. */
function refuse(socket: Socket, last: string | Buffer): void {
  socket.end(last);
  // What the client still sends is read and dropped, so it gets the answer rather than a reset.
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  socket.once('close', () => clearTimeout(timer));
}
