// The network of every sandbox of one runtime: a slot of SandboxNetworks
// (namespace, veth, nftables rules by address), and on the network's
// service address the resolver that sandboxes' /etc/resolv.conf names and
// the egress proxy that judges domain rules on ports 80 and 443.
//
// A sandbox's rules come as the control API states them; they are split
// here: CIDR blocks and addresses go to nftables, and domain names (allowOut
// only) make ports 80 and 443 go through the proxy, which reads the name a
// connection is for.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { EgressProxy, SandboxResolver, hostUpstreams, upstreamResolve, type EgressDecision, type EgressRules } from './egress/index.js';
import { SandboxNetworks, type AddressRules, type PrepareResult, type SandboxNetwork } from './network/index.js';
import { RuntimeError, type NetworkRules } from './runtime.js';
import { warningsOnly, type RuntimeLog } from './log.js';

export interface RuntimeNetworkOptions {
  /** nftables table and prefix of namespaces and veths: 1 to 9 lowercase letters and digits. Default: one derived from the data directory. */
  name?: string;
  /** Cut into one /30 per sandbox. Default: the one used before, else a free /20 of 10.208.0.0/12. */
  subnet?: string;
  /** The interface sandbox traffic is masqueraded out of (default: that of the default route). */
  uplink?: string;
  /** Private or special ranges sandboxes may reach, their rules permitting (on-premises services). */
  allowedPrivate?: string[];
  /** DNS servers the sandboxes' resolver and the egress proxy ask (default: the host's). */
  dns?: string[];
  /** Network slots kept ready. */
  poolSize?: number;
  /** Each decision of the egress proxy and each refused DNS query. */
  onEgress?: (event: EgressDecision) => void;
}

/** Ports on the service address. */
const DNS_PORT = 53;
const PROXY_HTTP_PORT = 80;
const PROXY_TLS_PORT = 443;

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A domain entry of allowOut, lower case without a trailing dot: `example.com` or `*.example.com`. */
function parseDomain(entry: string, where: string): string {
  const name = entry.trim().toLowerCase().replace(/\.$/, '');
  const bare = name.startsWith('*.') ? name.slice(2) : name;
  const labels = bare.split('.');
  if (!bare || bare.length > 253 || !labels.every((l) => LABEL.test(l)) || /^\d+$/.test(labels.at(-1)!)) {
    throw new RuntimeError('invalid', `${where} entry ${JSON.stringify(entry)} is not a CIDR block, an IP address or a domain name (a wildcard only as a leading '*.')`);
  }
  return name;
}

function isAddressEntry(entry: string): boolean {
  return isIP(entry.split('/')[0]!) !== 0;
}

interface Split {
  /** What nftables enforces (redirectWeb filled in by the caller). */
  addresses: AddressRules;
  /** What the proxy and resolver judge by. */
  egress: EgressRules;
  domains: string[];
}

/** Checks and splits a sandbox's rules; omitted lists are empty, omitted allowInternet is true. */
export function splitRules(rules: NetworkRules): Split {
  if (typeof rules !== 'object' || rules === null) throw new RuntimeError('invalid', 'network rules must be an object');
  const list = (value: unknown, where: string): string[] => {
    if (value === undefined) return [];
    if (!Array.isArray(value) || value.some((e) => typeof e !== 'string')) throw new RuntimeError('invalid', `${where} must be a list of strings`);
    return value as string[];
  };
  const allowOut = list(rules.allowOut, 'allowOut');
  const denyOut = list(rules.denyOut, 'denyOut');
  const allowInternet = rules.allowInternet ?? true;
  const domains: string[] = [];
  const allowAddresses: string[] = [];
  for (const e of allowOut) {
    if (isAddressEntry(e)) allowAddresses.push(e);
    else domains.push(parseDomain(e, 'allowOut'));
  }
  return {
    addresses: { allowInternet, allowOut: allowAddresses, denyOut },
    egress: { allowInternet, allowOut: [...allowAddresses, ...domains], denyOut },
    domains,
  };
}

/**
 * Which instance serves each network's service address in this process.
 * The newest prepare() on a network takes it over, as it takes over the
 * network's slots: the one before (a runtime restarted in the same process)
 * stops listening first.
 */
const serving = new Map<string, SandboxNetworking>();

export class SandboxNetworking {
  readonly nets: SandboxNetworks;
  private readonly opts: RuntimeNetworkOptions;
  private proxy: EgressProxy | undefined;
  private resolver: SandboxResolver | undefined;
  /** The rules the proxy and resolver judge by, per sandbox address. */
  private readonly byAddress = new Map<string, EgressRules>();

  private readonly stateDir: string;

  /** `refill` says when the host is free for the slot pool's refill, and how long after an acquire it starts (SandboxNetworksOptions). */
  constructor(stateDir: string, name: string, opts: RuntimeNetworkOptions, log: RuntimeLog = warningsOnly, refill?: { idle: () => boolean; delayMs: number }) {
    this.opts = opts;
    this.stateDir = stateDir;
    this.nets = new SandboxNetworks({
      log,
      stateDir,
      name: opts.name ?? name,
      subnet: opts.subnet,
      uplink: opts.uplink,
      allowedPrivate: opts.allowedPrivate,
      poolSize: opts.poolSize,
      idle: refill?.idle,
      refillDelayMs: refill?.delayMs,
      hostServices: [{ address: 'service', tcpPorts: [DNS_PORT, PROXY_HTTP_PORT, PROXY_TLS_PORT], udpPorts: [DNS_PORT] }],
    });
  }

  /** Sets the network up (adopting slots a previous process handed out) and starts the resolver and the proxy. */
  async prepare(rulesOf: (sandboxId: string) => NetworkRules | undefined): Promise<PrepareResult> {
    await this.close();
    await serving.get(this.stateDir)?.stopServing();
    serving.set(this.stateDir, this);
    const result = await this.nets.prepare();
    this.byAddress.clear();
    for (const n of result.adopted) {
      const rules = rulesOf(n.sandboxId);
      this.byAddress.set(n.address, rules ? splitRules(rules).egress : { allowInternet: n.rules.allowInternet, allowOut: n.rules.allowOut, denyOut: n.rules.denyOut });
    }
    const address = this.nets.serviceAddress;
    const upstream = this.opts.dns?.length ? this.opts.dns : hostUpstreams();
    const rulesFor = (source: string) => this.byAddress.get(source);
    const onEgress = this.opts.onEgress;
    this.resolver = new SandboxResolver({
      address,
      port: DNS_PORT,
      upstream,
      rulesFor,
      onRefused: onEgress && ((source, name, reason) => onEgress({ source, protocol: 'http', name, allowed: false, reason: `DNS: ${reason}` })),
    });
    this.proxy = new EgressProxy({
      address,
      httpPort: PROXY_HTTP_PORT,
      tlsPort: PROXY_TLS_PORT,
      rulesFor,
      blocked: (a) => this.nets.blocked(a),
      resolve: upstreamResolve(upstream),
      onDecision: onEgress,
    });
    try {
      await this.resolver.start();
      await this.proxy.start();
    } catch (err) {
      await this.close();
      throw new RuntimeError('unavailable', `the sandboxes' resolver and egress proxy could not listen on ${address}: ${(err as Error).message}`, { cause: err });
    }
    return result;
  }

  /** What a sandbox's /etc/resolv.conf says. */
  resolvConf(): string {
    return `nameserver ${this.nets.serviceAddress}\noptions ndots:0\n`;
  }

  private addressRules(split: Split): AddressRules {
    // Domains need the proxy to see ports 80 and 443; without a deny there is nothing for it to refuse.
    if (!split.domains.length || !split.addresses.allowInternet || !split.addresses.denyOut.length) return split.addresses;
    return { ...split.addresses, redirectWeb: { address: this.nets.serviceAddress, httpPort: PROXY_HTTP_PORT, tlsPort: PROXY_TLS_PORT } };
  }

  /** A slot for a sandbox, its rules in force before this returns. */
  async acquire(sandboxId: string, rules: NetworkRules): Promise<SandboxNetwork> {
    const split = splitRules(rules);
    const n = await this.nets.acquire(sandboxId, this.addressRules(split));
    this.byAddress.set(n.address, split.egress);
    return n;
  }

  /** Replaces a sandbox's rules live; connections they now deny are cut. */
  async setRules(sandboxId: string, rules: NetworkRules): Promise<SandboxNetwork> {
    const split = splitRules(rules);
    const n = await this.nets.setRules(sandboxId, this.addressRules(split));
    this.byAddress.set(n.address, split.egress);
    this.proxy?.reconsider(n.address);
    return n;
  }

  async release(sandboxId: string): Promise<void> {
    const n = this.nets.get(sandboxId);
    await this.nets.release(sandboxId);
    if (n) this.byAddress.delete(n.address);
  }

  get(sandboxId: string): SandboxNetwork | undefined {
    return this.nets.get(sandboxId);
  }

  /** Stops the resolver, the proxy and the pool's refill; slots stay for the next process. */
  async close(): Promise<void> {
    await this.stopServing();
    if (serving.get(this.stateDir) === this) serving.delete(this.stateDir);
    await this.nets.close();
  }

  /** Whether sandboxes can be networked now: the service interface is up and its resolver and proxy listen. */
  health(): { ok: boolean; detail: string } {
    const iface = this.nets.serviceInterface;
    let state: string;
    try {
      state = readFileSync(`/sys/class/net/${iface}/operstate`, 'utf8').trim();
    } catch {
      return { ok: false, detail: `the service interface ${iface} is missing` };
    }
    if (!this.proxy || !this.resolver) return { ok: false, detail: `the resolver and egress proxy on ${this.nets.serviceAddress} are not running` };
    return { ok: true, detail: `${iface} ${state}, resolver and egress proxy on ${this.nets.serviceAddress}` };
  }

  private async stopServing(): Promise<void> {
    await this.proxy?.close();
    await this.resolver?.close();
    this.proxy = undefined;
    this.resolver = undefined;
  }

  async removeEverything(): Promise<void> {
    await this.close();
    await this.nets.removeEverything();
    this.byAddress.clear();
  }

  leftovers(): Promise<string[]> {
    return this.nets.leftovers();
  }
}
