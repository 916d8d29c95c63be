import { BlockList, isIP } from 'node:net';

/**
 * A sandbox's egress rules as the control API states them (E2B's semantics):
 * an address that both lists match is allowed, anything neither list matches
 * is allowed, and `allowInternet: false` lets nothing out at all.
 */
export interface EgressRules {
  /** CIDR blocks, IP addresses and domain names (`example.com`, `*.example.com`). */
  readonly allowOut: readonly string[];
  /** CIDR blocks and IP addresses. */
  readonly denyOut: readonly string[];
  readonly allowInternet: boolean;
}

/** A verdict and the words that tell a user why. */
export interface Judgement {
  readonly allowed: boolean;
  readonly reason: string;
}

interface Compiled {
  readonly allowNets: BlockList;
  readonly denyNets: BlockList;
  readonly names: ReadonlySet<string>;
  /** `*.example.com` kept as `.example.com`: any deeper name, never the bare one. */
  readonly suffixes: readonly string[];
  /** denyOut covers every IPv4 address: DNS answers only names allowed by domain. */
  readonly denyAll: boolean;
}

// Rules are replaced whole on every change, so an object's compiled form
// never goes stale and the proxy and resolver need not compile per query.
const compiled = new WeakMap<EgressRules, Compiled>();

function compile(rules: EgressRules): Compiled {
  let c = compiled.get(rules);
  if (c) return c;
  const allowNets = new BlockList();
  const denyNets = new BlockList();
  const names = new Set<string>();
  const suffixes: string[] = [];
  for (const entry of rules.allowOut) {
    if (addNet(allowNets, entry)) continue;
    const name = normalizeName(entry);
    if (name.startsWith('*.')) suffixes.push(name.slice(1));
    else if (name) names.add(name);
  }
  let denyAll = false;
  for (const entry of rules.denyOut) {
    addNet(denyNets, entry);
    if (/^0+\.0+\.0+\.0+\/0+$/.test(entry.trim())) denyAll = true;
  }
  c = { allowNets, denyNets, names, suffixes, denyAll };
  compiled.set(rules, c);
  return c;
}

/** Adds a CIDR block or an address to a list; false when the entry is neither. */
function addNet(list: BlockList, entry: string): boolean {
  const [address = '', prefix, extra] = entry.trim().split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (prefix === undefined) {
    list.addAddress(address, type);
    return true;
  }
  const bits = Number(prefix);
  // The server refuses bad prefixes with a 400; one that slipped through matches nothing.
  if (!/^\d+$/.test(prefix) || bits > (family === 4 ? 32 : 128)) return true;
  list.addSubnet(address, bits, type);
  return true;
}

/** Lower case without a trailing dot: how DNS compares names. */
export function normalizeName(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}

/** An IPv4 address written as IPv4-mapped IPv6 is judged as the IPv4 address. */
export function normalizeAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

/** Whether an allowOut domain entry names `name` (a `*.` entry: any subdomain, not the bare domain). */
export function domainAllowed(rules: EgressRules, name: string): boolean {
  if (!rules.allowInternet) return false;
  const c = compile(rules);
  const n = normalizeName(name);
  return c.names.has(n) || c.suffixes.some((s) => n.endsWith(s));
}

/** The IP rules' verdict on one address. */
export function judgeAddress(rules: EgressRules, address: string): Judgement {
  if (!rules.allowInternet) return { allowed: false, reason: 'internet access is off for this sandbox' };
  const c = compile(rules);
  const ip = normalizeAddress(address);
  const type = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  if (c.allowNets.check(ip, type)) return { allowed: true, reason: `${ip} is in allowOut` };
  if (c.denyNets.check(ip, type)) return { allowed: false, reason: `${ip} is in denyOut` };
  return { allowed: true, reason: `${ip} is not in denyOut` };
}

/**
 * Whether the sandbox's resolver answers a name. With everything denied, only
 * names allowed by domain resolve, so DNS carries nothing out.
 */
export function resolvable(rules: EgressRules, name: string): Judgement {
  if (!rules.allowInternet) return { allowed: false, reason: 'internet access is off for this sandbox' };
  if (domainAllowed(rules, name)) return { allowed: true, reason: 'allowed by domain' };
  if (compile(rules).denyAll) return { allowed: false, reason: 'not in allowOut and denyOut denies everything' };
  return { allowed: true, reason: 'not denied' };
}
