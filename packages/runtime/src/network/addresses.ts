// Addresses and rules as this layer takes them: only validated, normalised
// IPv4/IPv6 addresses and CIDR blocks ever reach an nftables script, so a
// rule can never carry anything the script would read as syntax.
import { isIP } from 'node:net';
import { RuntimeError } from '../runtime.js';

/** What a sandbox may reach, as E2B's interface states it (domains are the egress proxy's, not this layer's). */
export interface AddressRules {
  /** false: no egress at all, whatever the lists say. */
  allowInternet: boolean;
  /** CIDR blocks and IP addresses; an address in both lists is allowed. */
  allowOut: string[];
  /** CIDR blocks and IP addresses; `0.0.0.0/0` with allowOut entries is "deny all but these". */
  denyOut: string[];
  /**
   * TCP to ports 80 and 443 of any address not allowed by allowOut goes to
   * this host service instead (the egress proxy that judges domains): port
   * 80 to `httpPort`, 443 to `tlsPort`. Two ports, because a redirected
   * connection does not tell a Node server which port it was meant for.
   */
  redirectWeb?: WebRedirect;
}

export interface WebRedirect {
  /** An IPv4 address of the host, or 'gateway': the sandbox's own gateway. */
  address: string;
  httpPort: number;
  tlsPort: number;
}

export interface Cidr {
  family: 4 | 6;
  /** The network address (host bits cleared) with its prefix length: `10.0.0.0/8`. */
  text: string;
  prefix: number;
  /** IPv4 only: the network address as an unsigned 32-bit number. */
  base: number;
}

/**
 * Ranges a sandbox never reaches, whatever its rules: this network
 * ("0/8"), private networks (RFC 1918), shared address space (carrier NAT),
 * loopback, link-local (cloud metadata lives there), multicast, and the
 * reserved block with the limited broadcast address. `allowedPrivate`
 * re-opens chosen parts of them.
 */
export const ALWAYS_DENIED_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

export function ipv4ToInt(address: string): number {
  const parts = address.split('.');
  return ((Number(parts[0]) << 24) | (Number(parts[1]) << 16) | (Number(parts[2]) << 8) | Number(parts[3])) >>> 0;
}

export function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

function maskOf(prefix: number): number {
  return prefix === 0 ? 0 : (0xffff_ffff << (32 - prefix)) >>> 0;
}

/** An IPv4 or IPv6 address, or either with a prefix length; refused naming the entry and where it came from. */
export function parseCidr(entry: unknown, where: string): Cidr {
  const bad = (why: string) => new RuntimeError('invalid', `${where} entry ${JSON.stringify(entry)} ${why}`);
  if (typeof entry !== 'string') throw bad('is not a string');
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const family = address.includes('%') ? 0 : isIP(address);
  if (family !== 4 && family !== 6) throw bad('is not an IP address or CIDR block');
  const max = family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = entry.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) throw bad(`has a prefix length ${JSON.stringify(p)} that is not a number`);
    prefix = Number(p);
    if (prefix > max) throw bad(`has a prefix length ${prefix} over ${max}, the most for IPv${family}`);
  }
  if (family === 6) return { family, text: `${address.toLowerCase()}/${prefix}`, prefix, base: 0 };
  const base = (ipv4ToInt(address) & maskOf(prefix)) >>> 0;
  return { family, text: `${intToIpv4(base)}/${prefix}`, prefix, base };
}

export function parseIpv4(value: unknown, where: string): string {
  if (typeof value !== 'string' || isIP(value) !== 4) throw new RuntimeError('invalid', `${where} ${JSON.stringify(value)} is not an IPv4 address`);
  return value;
}

export function parsePort(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw new RuntimeError('invalid', `${where} ${JSON.stringify(value)} is not a port (1 to 65535)`);
  }
  return value;
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  const prefix = Math.min(a.prefix, b.prefix);
  return ((a.base ^ b.base) & maskOf(prefix)) === 0;
}

/** The block's first and last address. */
export function rangeOf(c: Cidr): [number, number] {
  return [c.base, (c.base | (~maskOf(c.prefix) >>> 0)) >>> 0];
}

export interface NormalizedRules {
  allowInternet: boolean;
  allowOut: Cidr[];
  denyOut: Cidr[];
  redirectWeb?: WebRedirect;
}

/**
 * Checks rules as a caller gives them. Omitted lists are empty and an
 * omitted allowInternet is true (E2B's default). IPv6 entries are accepted
 * and kept, but sandboxes have no IPv6 route: they open nothing.
 */
export function normalizeRules(rules: unknown): NormalizedRules {
  if (typeof rules !== 'object' || rules === null || Array.isArray(rules)) throw new RuntimeError('invalid', 'network rules must be an object');
  const r = rules as Partial<Record<keyof AddressRules, unknown>>;
  if (r.allowInternet !== undefined && typeof r.allowInternet !== 'boolean') throw new RuntimeError('invalid', 'allowInternet must be true or false');
  const list = (value: unknown, where: 'allowOut' | 'denyOut'): Cidr[] => {
    if (value === undefined) return [];
    if (!Array.isArray(value)) throw new RuntimeError('invalid', `${where} must be a list of CIDR blocks and IP addresses`);
    return value.map((e) => parseCidr(e, where));
  };
  const out: NormalizedRules = { allowInternet: r.allowInternet ?? true, allowOut: list(r.allowOut, 'allowOut'), denyOut: list(r.denyOut, 'denyOut') };
  if (r.redirectWeb !== undefined) {
    const w = r.redirectWeb as Partial<Record<keyof WebRedirect, unknown>> | null;
    if (typeof w !== 'object' || w === null) throw new RuntimeError('invalid', 'redirectWeb must be { address, httpPort, tlsPort }');
    out.redirectWeb = {
      address: w.address === 'gateway' ? 'gateway' : parseIpv4(w.address, 'redirectWeb address'),
      httpPort: parsePort(w.httpPort, 'redirectWeb httpPort'),
      tlsPort: parsePort(w.tlsPort, 'redirectWeb tlsPort'),
    };
  }
  return out;
}

export function rulesOf(n: NormalizedRules): AddressRules {
  return {
    allowInternet: n.allowInternet,
    allowOut: n.allowOut.map((c) => c.text),
    denyOut: n.denyOut.map((c) => c.text),
    ...(n.redirectWeb ? { redirectWeb: { ...n.redirectWeb } } : {}),
  };
}

const ALWAYS_DENIED = ALWAYS_DENIED_V4.map((c) => parseCidr(c, 'always denied'));

/**
 * The same decision the sandbox's nftables chain makes, for one IPv4
 * destination: used to find the sockets that a change of rules has to cut.
 * `proxied` is a connection the web redirect sends to the egress proxy,
 * which judges it itself.
 */
export function egressVerdict(
  rules: NormalizedRules,
  scope: { sandboxes: Cidr; allowedPrivate: Cidr[] },
  address: string,
  port: number,
): 'allow' | 'deny' | 'proxied' {
  if (isIP(address) !== 4) return 'deny';
  const at = parseCidr(address, 'address');
  if (overlaps(at, scope.sandboxes)) return 'deny';
  const inside = (list: Cidr[]) => list.some((c) => c.family === 4 && overlaps(at, c));
  if (inside(ALWAYS_DENIED) && !inside(scope.allowedPrivate)) return 'deny';
  if (!rules.allowInternet) return 'deny';
  if (inside(rules.allowOut)) return 'allow';
  if (rules.redirectWeb && (port === 80 || port === 443)) return 'proxied';
  if (inside(rules.denyOut)) return 'deny';
  return 'allow';
}
