import { Resolver } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';

/** A DNS server as `address`, `address:port` or `[v6 address]:port`. */
export interface Upstream {
  readonly host: string;
  readonly port: number;
}

export function parseUpstream(text: string): Upstream {
  const s = text.trim();
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  const [host, port] = bracketed
    ? [bracketed[1]!, bracketed[2]]
    : isIP(s.replace(/%.*$/, '')) === 6
      ? [s, undefined]
      : (s.split(':') as [string, string | undefined]);
  const number = port === undefined ? 53 : Number(port);
  if (isIP(host.replace(/%.*$/, '')) === 0 || !Number.isInteger(number) || number < 1 || number > 65535) {
    throw new Error(`DNS upstream '${text}' is not an address with an optional port`);
  }
  return { host, port: number };
}

const isLoopback = (address: string) => /^127\./.test(address) || address === '::1';

/** The `nameserver` addresses of a resolv.conf text, in order. */
export function nameserversOf(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m && isIP(m[1]!.replace(/%.*$/, '')) !== 0) out.push(m[1]!);
  }
  return out;
}

function readNameservers(path: string): string[] {
  try {
    return nameserversOf(readFileSync(path, 'utf8'));
  } catch {
    return [];
  }
}

/**
 * The host's DNS servers. A loopback stub (systemd-resolved's 127.0.0.53) is
 * used only when nothing else is known: the servers it forwards to are in
 * systemd-resolved's own resolv.conf, and asking them directly keeps one hop
 * and one cache out of the sandbox's path.
 */
export function hostUpstreams(files: readonly string[] = ['/etc/resolv.conf', '/run/systemd/resolve/resolv.conf']): string[] {
  const all = files.flatMap(readNameservers);
  const remote = [...new Set(all.filter((a) => !isLoopback(a)))];
  return remote.length > 0 ? remote : [...new Set(all)];
}

export interface UpstreamResolveOptions {
  /** How long one query to one server may take. */
  readonly timeoutMs?: number;
  /** Answers are kept for their TTL, never longer than this. */
  readonly maxTtlSeconds?: number;
  /** How many names the cache holds at most. */
  readonly maxEntries?: number;
}

/**
 * The IPv4 addresses of a name as the given servers answer, kept for the
 * answer's TTL: the egress proxy resolves every name it connects to itself,
 * and most connections go to a name it resolved moments before.
 */
export function upstreamResolve(servers: readonly string[], opts: UpstreamResolveOptions = {}): (name: string) => Promise<string[]> {
  const timeoutMs = opts.timeoutMs ?? 2000;
  const maxTtl = opts.maxTtlSeconds ?? 300;
  const maxEntries = opts.maxEntries ?? 4096;
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  resolver.setServers(servers.map((s) => {
    const u = parseUpstream(s);
    return isIP(u.host.replace(/%.*$/, '')) === 6 ? `[${u.host}]:${u.port}` : `${u.host}:${u.port}`;
  }));
  const cache = new Map<string, { addresses: string[]; until: number }>();
  return async (name) => {
    const now = Date.now();
    const hit = cache.get(name);
    if (hit && hit.until > now) return hit.addresses;
    const records = await resolver.resolve4(name, { ttl: true });
    const ttl = Math.min(maxTtl, ...records.map((r) => r.ttl));
    const addresses = records.map((r) => r.address);
    cache.delete(name);
    if (ttl > 0) {
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
      cache.set(name, { addresses, until: now + ttl * 1000 });
    }
    return addresses;
  };
}
