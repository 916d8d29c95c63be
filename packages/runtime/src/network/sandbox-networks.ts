// A network per sandbox: its own network namespace, joined to the host by a
// veth pair with a /30 of its own, NAT out of the host's uplink, and its
// egress rules in Paddock's nftables table. Namespaces are made ahead in a
// pool, so that handing one to a sandbox costs one nftables transaction.
//
// A slot handed to a sandbox is recorded in stateDir; the next process on
// the same stateDir adopts it, and removes whatever else of this network it
// finds (pooled and half-made slots).
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CommandError } from '../exec.js';
import { RuntimeError } from '../runtime.js';
import { KeyedMutex, SANDBOX_ID } from '../util.js';
import { egressVerdict, intToIpv4, normalizeRules, overlaps, parseCidr, parseIpv4, parsePort, rulesOf, type Cidr, type AddressRules, type NormalizedRules } from './addresses.js';
import { HostNet, NETNS_DIR } from './host-net.js';
import { servicesScript, slotAddScript, slotRemoveScript, slotRulesScript, tableScript, type HostService, type SlotRef, type TableSpec } from './nft-script.js';
import { warningsOnly, type RuntimeLog } from '../log.js';

export const DEFAULT_NETWORK_NAME = 'paddock';
/**
 * Where a network without a configured subnet takes one /20 (1023
 * sandboxes) that no other network of this host holds: away from the
 * defaults of Docker (172.17/16), Podman (10.88/16, 10.89/24...) and common
 * Kubernetes pod and service ranges.
 */
export const AUTO_SUBNET_RANGE = '10.208.0.0/12';
const AUTO_SUBNET_PREFIX = 20;
/**
 * Host-wide claims of network names and subnets, one file each naming the
 * state directory that holds it: two runtimes on one host never take the
 * same. In /run, so that a reboot (which ends every namespace) forgets them.
 */
export const CLAIMS_DIR = '/run/paddock/networks';
/** A claim younger than this is kept even if its holder has not written its state yet. */
const CLAIM_GRACE_MS = 60_000;
export const DEFAULT_NETWORK_POOL_SIZE = 4;
/** The interface a sandbox sees; every slot's is called so. */
export const SANDBOX_INTERFACE = 'eth0';
const SLOT_PREFIX = 30;

export interface HostServiceOptions {
  /**
   * An IPv4 address of the host; 'gateway' for each sandbox's own gateway (a
   * service listening on 0.0.0.0); 'service' for the network's service
   * address (`serviceAddress`), which only sandboxes route to.
   */
  address: string;
  tcpPorts?: number[];
  udpPorts?: number[];
}

export interface SandboxNetworksOptions {
  /** A host-only directory of the runtime's, where handed-out slots are recorded. */
  stateDir: string;
  /** The nftables table (`inet NAME`) and the prefix of namespaces and veths (`NAME-INDEX`): 1 to 9 lowercase letters and digits. */
  name?: string;
  /**
   * Cut into one /30 per sandbox; a prefix length from 8 to 28. Unset: the
   * one this stateDir had before, or a free /20 of AUTO_SUBNET_RANGE.
   */
  subnet?: string;
  /** The interface sandbox traffic is masqueraded out of; that of the default route when omitted. */
  uplink?: string;
  /** Parts of the always-denied ranges that sandboxes may reach (on-premises services), their rules permitting. */
  allowedPrivate?: string[];
  /** Slots kept ready; 0 makes each on acquire. */
  poolSize?: number;
  /**
   * Services on the host that sandboxes may reach (the resolver, the egress
   * proxy). The address 'service' is this network's own service address.
   */
  hostServices?: HostServiceOptions[];
  /** The bound on each command (ip, nft, ss, sysctl). */
  commandTimeoutMs?: number;
  /**
   * Whether the host is free for the pool's refill now. A refill is several
   * ip and nft processes; run while a sandbox boots, it took ~50 ms from
   * that boot's runc on a 2-core host. While this says no, the refill waits
   * (looking again every `refillDelayMs`). Default: always free.
   */
  idle?: () => boolean;
  /** How long after an acquire (or a busy moment) the refill waits; default 0. */
  refillDelayMs?: number;
  /** Where failures in the background go; default process warnings. */
  log?: RuntimeLog;
}

export interface SandboxNetwork {
  sandboxId: string;
  /** The namespace file: what the sandbox's OCI config names (`{ type: 'network', path }`). */
  netnsPath: string;
  netnsName: string;
  /** The host's end of the veth pair. */
  hostInterface: string;
  /** The sandbox's end, inside its namespace. */
  interface: string;
  /** The sandbox's address on its interface. */
  address: string;
  /** The host's end: the sandbox's default route, and the address 'gateway' host services answer on. */
  gateway: string;
  prefixLength: number;
  rules: AddressRules;
}

export interface PrepareResult {
  /** Sandboxes whose slots a previous process handed out and this one took over. */
  adopted: SandboxNetwork[];
  /** Sandboxes recorded with a slot whose namespace is gone: their records were dropped. */
  lost: string[];
}

interface Slot extends SlotRef {
  /** Both the namespace's name and the host veth's. */
  name: string;
  /**
   * A pooled slot is in the table already, with the default rules: handed
   * out with those, it costs no nftables transaction.
   */
  inTable?: boolean;
}

/** What a slot has when its sandbox asks for nothing else: the internet, no lists. */
const DEFAULT_RULES = normalizeRules({});

function sameRules(a: NormalizedRules, b: NormalizedRules): boolean {
  const texts = (l: Cidr[]) => l.map((c) => c.text).join(',');
  return (
    a.allowInternet === b.allowInternet &&
    texts(a.allowOut) === texts(b.allowOut) &&
    texts(a.denyOut) === texts(b.denyOut) &&
    JSON.stringify(a.redirectWeb ?? null) === JSON.stringify(b.redirectWeb ?? null)
  );
}

interface Held {
  slot: Slot;
  sandboxId: string;
  rules: NormalizedRules;
}

interface SlotRecord {
  index: number;
  sandboxId: string;
  rules: AddressRules;
}

export class SandboxNetworks {
  readonly name: string;
  private readonly configuredSubnet: Cidr | undefined;
  private chosenSubnet: Cidr | undefined;
  private readonly stateDir: string;
  private readonly allowedPrivate: Cidr[];
  private readonly poolSize: number;
  private readonly host: HostNet;
  private readonly uplinkOption: string | undefined;
  private services: HostService[];
  private spec: TableSpec | undefined;
  /** The uplink's MTU, given to both ends of each veth so that sandboxes need no path MTU discovery for it. */
  private mtu: number | undefined;
  private readonly held = new Map<string, Held>();
  private readonly pool: Slot[] = [];
  /** Indexes of held, pooled and half-made slots. */
  private readonly used = new Set<number>();
  private cursor = 0;
  private filling: Promise<void> | undefined;
  private refillTimer: NodeJS.Timeout | undefined;
  private readonly idle: () => boolean;
  private readonly refillDelayMs: number;
  private closed = false;
  /** Why the last refill stopped short, if it did. */
  poolError: Error | undefined;
  private readonly perSandbox = new KeyedMutex();
  /** The host's IPv4 addresses when prepare() ran. */
  private localAddresses = new Set<string>();
  private readonly nftQueue = new KeyedMutex();
  private readonly log: RuntimeLog;

  constructor(opts: SandboxNetworksOptions) {
    this.log = opts.log ?? warningsOnly;
    this.name = opts.name ?? DEFAULT_NETWORK_NAME;
    if (!/^[a-z][a-z0-9]{0,8}$/.test(this.name)) throw new RuntimeError('invalid', `network name ${JSON.stringify(this.name)} must be 1 to 9 lowercase letters and digits, starting with a letter`);
    this.stateDir = opts.stateDir;
    if (opts.subnet !== undefined) {
      const subnet = parseCidr(opts.subnet, 'subnet');
      if (subnet.family !== 4 || subnet.prefix < 8 || subnet.prefix > SLOT_PREFIX - 2) {
        throw new RuntimeError('invalid', `subnet ${subnet.text} must be an IPv4 block with a prefix length from 8 to ${SLOT_PREFIX - 2}`);
      }
      this.configuredSubnet = subnet;
    }
    this.allowedPrivate = (opts.allowedPrivate ?? []).map((c) => parseCidr(c, 'allowedPrivate'));
    this.poolSize = opts.poolSize ?? DEFAULT_NETWORK_POOL_SIZE;
    if (!Number.isInteger(this.poolSize) || this.poolSize < 0) throw new RuntimeError('invalid', `poolSize ${this.poolSize} must be a whole number, 0 or more`);
    if (opts.uplink !== undefined && !/^[A-Za-z0-9_.-]{1,15}$/.test(opts.uplink)) throw new RuntimeError('invalid', `uplink ${JSON.stringify(opts.uplink)} is not an interface name`);
    this.uplinkOption = opts.uplink;
    this.services = normalizeServices(opts.hostServices ?? []);
    this.host = new HostNet(opts.commandTimeoutMs ?? 10_000);
    this.idle = opts.idle ?? (() => true);
    this.refillDelayMs = opts.refillDelayMs ?? 0;
  }

  /** The sandboxes' subnet: the configured one, or the one prepare() took. */
  get subnet(): Cidr {
    const s = this.chosenSubnet ?? this.configuredSubnet;
    if (!s) throw new RuntimeError('unavailable', 'sandbox networks are not prepared: call prepare() first');
    return s;
  }

  /** Slots of the subnet; the last is the service address's, never a sandbox's. */
  private get capacity(): number {
    return 2 ** (SLOT_PREFIX - this.subnet.prefix) - 1;
  }

  /**
   * The host's address that only sandboxes route to, on an interface of its
   * own (`NAME-svc`): where the resolver and the egress proxy listen. The
   * first address of the subnet's last /30.
   */
  get serviceAddress(): string {
    return intToIpv4(this.subnet.base + this.capacity * 4 + 1);
  }

  /** The interface that holds the service address. */
  get serviceInterface(): string {
    return `${this.name}-svc`;
  }

  /**
   * Why a sandbox may never reach an address whatever its rules say (the
   * host's own addresses, other sandboxes, private and special ranges not
   * opened by allowedPrivate), or undefined: what the egress proxy asks
   * before it connects anywhere for a sandbox.
   */
  blocked(address: string): string | undefined {
    const ip = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;
    const at = parseCidrOrUndefined(ip);
    if (!at || at.family !== 4) return `${address} is not an IPv4 address (sandboxes have no IPv6)`;
    if (overlaps(at, this.subnet)) return `${ip} is in the sandboxes' network`;
    if (this.localAddresses.has(ip)) return `${ip} is this host`;
    if (egressVerdict({ allowInternet: true, allowOut: [], denyOut: [] }, { sandboxes: this.subnet, allowedPrivate: this.allowedPrivate }, ip, 1) === 'deny') {
      return `${ip} is in a private or special range`;
    }
    return undefined;
  }

  private slotAt(index: number): Slot {
    const base = this.subnet.base + index * 4;
    const name = `${this.name}-${index}`;
    return { index, name, iface: name, gateway: intToIpv4(base + 1), address: intToIpv4(base + 2) };
  }

  private table(): TableSpec {
    if (!this.spec) throw new RuntimeError('unavailable', 'sandbox networks are not prepared: call prepare() first');
    return this.spec;
  }

  /**
   * Turns IPv4 forwarding on, adopts the recorded slots, removes every other
   * namespace and veth of this network, writes the table (replacing any
   * previous one in the same transaction) and starts filling the pool.
   */
  async prepare(): Promise<PrepareResult> {
    try {
      return await this.prepareOnce();
    } catch (err) {
      // Claims of a network that never got its state are nobody's.
      if (!(await readState(this.stateDir))) for (const f of await this.ownClaims()) await rm(f, { force: true });
      throw err;
    }
  }

  private async prepareOnce(): Promise<PrepareResult> {
    await this.close();
    this.pool.length = 0;
    await this.host.checkTools();
    const uplink = this.uplinkOption ?? (await this.host.defaultUplink());
    let links = await this.host.links();
    const uplinkLink = links.find((l) => l.ifname === uplink);
    if (!uplinkLink) throw new RuntimeError('invalid', `uplink interface '${uplink}' does not exist`);
    if (this.ours(uplink) !== undefined || uplink === this.serviceInterface) throw new RuntimeError('invalid', `uplink interface '${uplink}' is one of the sandboxes'`);
    this.mtu = uplinkLink.mtu;
    await this.claim('name', this.name, (st) => st.name === this.name);
    const routes = (await this.host.routes()).filter((r) => r.dst !== 'default' && !(r.dev !== undefined && (this.ours(r.dev) !== undefined || r.dev === this.serviceInterface)));
    const routed = (c: Cidr) => routes.map((r) => ({ dst: parseCidr(r.dst, 'route'), dev: r.dev })).find((r) => overlaps(r.dst, c));
    if (this.configuredSubnet) {
      const r = routed(this.configuredSubnet);
      if (r) throw new RuntimeError('conflict', `the sandboxes' subnet ${this.configuredSubnet.text} overlaps the host's route to ${r.dst.text}${r.dev ? ` on ${r.dev}` : ''}: choose another subnet`);
      await this.claimSubnet(this.configuredSubnet, true);
    } else {
      this.chosenSubnet = await this.autoSubnet((c) => routed(c) === undefined);
    }
    await this.checkState();
    links = await this.serviceInterfaceUp(links);
    this.localAddresses = new Set((await this.host.addresses()).map((a) => a.local));
    this.services = this.services.map((s) => (s.address === 'service' ? { ...s, address: this.serviceAddress } : s));
    await this.checkServices(this.services);
    if (!(await this.host.ipForwarding())) await this.host.enableIpForwarding();

    const records = await this.readRecords();
    const namespaces = new Set((await this.host.netnsNames()).filter((n) => this.ours(n) !== undefined));
    const ifaces = new Set(links.map((l) => l.ifname).filter((n) => this.ours(n) !== undefined));
    const adopted: Held[] = [];
    const lost: string[] = [];
    for (const rec of records) {
      const slot = this.slotAt(rec.index);
      if (!namespaces.has(slot.name) || rec.index >= this.capacity) {
        lost.push(rec.sandboxId);
        await rm(this.recordPath(rec.index), { force: true });
        continue;
      }
      // The namespace outlived its veth (someone deleted it): a new pair restores the way out.
      if (!ifaces.has(slot.iface)) await this.linkUp(slot);
      adopted.push({ slot, sandboxId: rec.sandboxId, rules: normalizeRules(rec.rules) });
    }
    const keep = new Set(adopted.map((h) => h.slot.name));
    await this.remove([...ifaces].filter((n) => !keep.has(n)), [...namespaces].filter((n) => !keep.has(n)));

    this.spec = { name: this.name, subnet: this.subnet, uplink, allowedPrivate: this.allowedPrivate, services: this.services };
    await this.nft(tableScript(this.spec, adopted.map((h) => ({ slot: h.slot, rules: h.rules }))), 'write the sandboxes\' table');
    this.held.clear();
    this.used.clear();
    for (const h of adopted) {
      this.held.set(h.sandboxId, h);
      this.used.add(h.slot.index);
    }
    this.closed = false;
    this.fillPool();
    return { adopted: adopted.map((h) => this.view(h)), lost };
  }

  /** A slot for a sandbox, its rules in force before this returns. */
  async acquire(sandboxId: string, rules: AddressRules): Promise<SandboxNetwork> {
    checkSandboxId(sandboxId);
    const normalized = normalizeRules(rules);
    return this.perSandbox.run(sandboxId, async () => {
      const t = this.table();
      if (this.held.has(sandboxId)) throw new RuntimeError('conflict', `sandbox ${sandboxId} already has a network`);
      const slot = (await this.fromPool()) ?? (await this.makeSlot(this.allocate()));
      const h: Held = { slot, sandboxId, rules: normalized };
      this.held.set(sandboxId, h);
      try {
        this.checkRedirect(slot, normalized);
        await this.writeRecord(h);
        if (!slot.inTable) await this.nft(slotAddScript(t, slot, normalized), `apply the network rules of sandbox ${sandboxId}`);
        else if (!sameRules(normalized, DEFAULT_RULES)) await this.nft(slotRulesScript(t, slot, normalized), `apply the network rules of sandbox ${sandboxId}`);
        slot.inTable = true;
      } catch (err) {
        this.held.delete(sandboxId);
        await rm(this.recordPath(slot.index), { force: true });
        if (slot.inTable) await this.nft(slotRemoveScript(t, slot), `remove the network rules of sandbox ${sandboxId}`).catch(() => undefined);
        await this.destroySlot(slot);
        throw err;
      } finally {
        // After the caller has its slot: a refill's first spawn would otherwise hold up the answer.
        this.refillSoon();
      }
      return this.view(h);
    });
  }

  /**
   * Replaces a sandbox's rules in one nftables transaction: the old rules
   * stay in force if it fails. Its open TCP connections that the new rules
   * deny are then aborted inside its namespace, which resets both ends.
   */
  async setRules(sandboxId: string, rules: AddressRules): Promise<SandboxNetwork> {
    const normalized = normalizeRules(rules);
    return this.perSandbox.run(sandboxId, async () => {
      const h = this.heldOf(sandboxId);
      // The rules it has already (a pooled sandbox claimed with the defaults): nothing to apply, nothing to cut.
      if (sameRules(h.rules, normalized)) return this.view(h);
      this.checkRedirect(h.slot, normalized);
      await this.nft(slotRulesScript(this.table(), h.slot, normalized), `apply the network rules of sandbox ${sandboxId}`);
      h.rules = normalized;
      await this.writeRecord(h);
      try {
        await this.cutDenied(h);
      } catch (err) {
        // The rules are in force; a connection left open is reset on its next packet.
        this.log.warn({ sandboxID: sandboxId, err }, 'connections its new network rules deny could not be aborted');
      }
      return this.view(h);
    });
  }

  /** Removes a sandbox's slot: its rules, veth pair and namespace. False when it had none. */
  async release(sandboxId: string): Promise<boolean> {
    return this.perSandbox.run(sandboxId, async () => {
      const h = this.held.get(sandboxId);
      if (!h) return false;
      let failure: unknown;
      try {
        await this.nft(slotRemoveScript(this.table(), h.slot), `remove the network rules of sandbox ${sandboxId}`);
      } catch (err) {
        failure = err;
      }
      this.held.delete(sandboxId);
      await rm(this.recordPath(h.slot.index), { force: true });
      await this.destroySlot(h.slot);
      if (failure) throw failure;
      return true;
    });
  }

  get(sandboxId: string): SandboxNetwork | undefined {
    const h = this.held.get(sandboxId);
    return h && this.view(h);
  }

  list(): SandboxNetwork[] {
    return [...this.held.values()].map((h) => this.view(h));
  }

  /** How many slots wait in the pool. */
  pooled(): number {
    return this.pool.length;
  }

  /**
   * Resolves once the pool is full, or a refill stopped short (then
   * `poolError` says why); a refill that waits for the host to be idle
   * starts now if it is.
   */
  async poolReady(): Promise<void> {
    if (this.refillTimer && this.idle()) {
      clearTimeout(this.refillTimer);
      this.refillTimer = undefined;
      this.fillPool();
    }
    while (this.filling) await this.filling;
  }

  /** Refills the pool once `refillDelayMs` passed and the host is idle. */
  private refillSoon(): void {
    if (this.refillTimer || this.closed) return;
    this.refillTimer = setTimeout(() => {
      this.refillTimer = undefined;
      if (this.idle()) this.fillPool();
      else this.refillSoon();
    }, this.refillDelayMs);
    this.refillTimer.unref();
  }

  /** Replaces the host services sandboxes may reach, in one transaction. */
  async setHostServices(services: HostServiceOptions[]): Promise<void> {
    const next = normalizeServices(services).map((s) => (s.address === 'service' ? { ...s, address: this.serviceAddress } : s));
    await this.checkServices(next);
    const t = this.table();
    const spec = { ...t, services: next };
    await this.nft(servicesScript(spec), 'replace the host services sandboxes reach');
    this.services = next;
    this.spec = spec;
  }

  /** Stops refilling the pool and waits for a refill under way; handed-out slots stay for the next process. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refillTimer);
    this.refillTimer = undefined;
    await this.poolReady();
  }

  /** What of this network is on the host: namespaces, veths, the table, records. Empty after removeEverything(). */
  async leftovers(): Promise<string[]> {
    const out: string[] = [];
    for (const n of await this.host.netnsNames()) if (this.ours(n) !== undefined) out.push(`network namespace ${join(NETNS_DIR, n)}`);
    for (const l of await this.host.links()) if (this.ours(l.ifname) !== undefined || l.ifname === this.serviceInterface) out.push(`interface ${l.ifname}`);
    if (await this.host.hasTable(this.name)) out.push(`nftables table inet ${this.name}`);
    for (const f of await readdirOrEmpty(join(this.stateDir, 'slots'))) out.push(`slot record ${join(this.stateDir, 'slots', f)}`);
    for (const f of await this.ownClaims()) out.push(`claim ${f}`);
    return out;
  }

  /** Removes every namespace, veth and record of this network and its table. IP forwarding stays on. */
  async removeEverything(): Promise<void> {
    await this.close();
    const namespaces = (await this.host.netnsNames()).filter((n) => this.ours(n) !== undefined);
    const ifaces = (await this.host.links()).map((l) => l.ifname).filter((n) => this.ours(n) !== undefined || n === this.serviceInterface);
    if (await this.host.hasTable(this.name)) await this.nft(`delete table inet ${this.name}\n`, 'remove the sandboxes\' table');
    await this.remove(ifaces, namespaces);
    await rm(join(this.stateDir, 'slots'), { recursive: true, force: true });
    await rm(join(this.stateDir, 'network.json'), { force: true });
    for (const f of await this.ownClaims()) await rm(f, { force: true });
    this.chosenSubnet = undefined;
    this.held.clear();
    this.pool.length = 0;
    this.used.clear();
    this.spec = undefined;
  }

  // ------------------------------------------------------------------ claims

  private claimPath(kind: 'name' | 'subnet', key: string): string {
    return join(CLAIMS_DIR, `${kind}-${key.replace('/', '_')}`);
  }

  /**
   * Takes a host-wide claim, or finds it this stateDir's already. A claim
   * whose state directory no longer records it (removed, or moved on to
   * another) is stale and taken over once it is older than a minute.
   * `mine(record)` says whether a live holder's network.json still holds it.
   */
  private async claim(kind: 'name' | 'subnet', key: string, mine: (state: { name?: string; subnet?: string }) => boolean): Promise<boolean> {
    await mkdir(CLAIMS_DIR, { recursive: true, mode: 0o755 });
    const path = this.claimPath(kind, key);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await writeFile(path, JSON.stringify({ stateDir: this.stateDir }) + '\n', { flag: 'wx' });
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      let holder: string | undefined;
      let age: number;
      try {
        holder = (JSON.parse(await readFile(path, 'utf8')) as { stateDir?: string }).stateDir;
        age = Date.now() - (await stat(path)).mtimeMs;
      } catch {
        // Being written or removed right now: look again.
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      if (holder === this.stateDir) return true;
      if (age < CLAIM_GRACE_MS || (holder && (await holderKeeps(holder, mine)))) {
        if (kind === 'name') throw new RuntimeError('conflict', `the network name '${key}' is taken by the sandbox networks of ${holder}: choose another`);
        return false;
      }
      await rm(path, { force: true });
    }
    return false;
  }

  private async claimSubnet(subnet: Cidr, configured: boolean): Promise<boolean> {
    // Another network's claim on an overlapping block of another size.
    for (const f of await readdirOrEmpty(CLAIMS_DIR)) {
      if (!f.startsWith('subnet-')) continue;
      const other = parseCidrOrUndefined(f.slice('subnet-'.length).replace('_', '/'));
      if (!other || other.text === subnet.text || !overlaps(other, subnet)) continue;
      let holder: string | undefined;
      try {
        holder = (JSON.parse(await readFile(join(CLAIMS_DIR, f), 'utf8')) as { stateDir?: string }).stateDir;
      } catch {
        continue;
      }
      if (holder === this.stateDir || !holder || !(await holderKeeps(holder, (st) => st.subnet === other.text))) continue;
      if (configured) throw new RuntimeError('conflict', `the sandboxes' subnet ${subnet.text} overlaps ${other.text}, which the sandbox networks of ${holder} hold: choose another subnet`);
      return false;
    }
    const got = await this.claim('subnet', subnet.text, (st) => st.subnet === subnet.text);
    if (!got && configured) throw new RuntimeError('conflict', `the sandboxes' subnet ${subnet.text} is held by another sandbox network of this host: choose another subnet`);
    return got;
  }

  /** The subnet this stateDir had, if it is still free, else the first free /20 of AUTO_SUBNET_RANGE that no host route overlaps. */
  private async autoSubnet(free: (c: Cidr) => boolean): Promise<Cidr> {
    const range = parseCidr(AUTO_SUBNET_RANGE, 'range');
    const had = (await readState(this.stateDir))?.subnet;
    const previous = had ? parseCidrOrUndefined(had) : undefined;
    const candidates: Cidr[] = previous && previous.family === 4 ? [previous] : [];
    const blocks = 2 ** (AUTO_SUBNET_PREFIX - range.prefix);
    for (let i = 0; i < blocks; i++) candidates.push(parseCidr(`${intToIpv4(range.base + i * 2 ** (32 - AUTO_SUBNET_PREFIX))}/${AUTO_SUBNET_PREFIX}`, 'block'));
    for (const c of candidates) if (free(c) && (await this.claimSubnet(c, false))) return c;
    throw new RuntimeError('unavailable', `no /${AUTO_SUBNET_PREFIX} of ${AUTO_SUBNET_RANGE} is free for sandboxes: configure a subnet`);
  }

  /** Makes the service interface (a bridge without ports, holding only the service address: some kernels have no dummy interfaces) unless it is there; returns the links after. */
  private async serviceInterfaceUp(links: Array<{ ifname: string; mtu?: number }>): Promise<Array<{ ifname: string; mtu?: number }>> {
    const iface = this.serviceInterface;
    const want = this.serviceAddress;
    if (links.some((l) => l.ifname === iface)) {
      const has = (await this.host.addresses()).filter((a) => a.ifname === iface).map((a) => a.local);
      if (has.length === 1 && has[0] === want) return links;
      await this.host.ip(['link', 'del', iface]);
    }
    await this.host.ipBatch([`link add ${iface} type bridge`, `addr add ${want}/32 dev ${iface}`, `link set ${iface} up`]);
    return this.host.links();
  }

  // ------------------------------------------------------------------ slots

  /** The claim files that name this stateDir. */
  private async ownClaims(): Promise<string[]> {
    const out: string[] = [];
    for (const f of await readdirOrEmpty(CLAIMS_DIR)) {
      const path = join(CLAIMS_DIR, f);
      try {
        if ((JSON.parse(await readFile(path, 'utf8')) as { stateDir?: string }).stateDir === this.stateDir) out.push(path);
      } catch {
        // Gone meanwhile, or another's being written.
      }
    }
    return out;
  }

  /** The index of one of this network's namespaces or veths, from its name. */
  private ours(name: string): number | undefined {
    const m = /^([a-z0-9]+)-(\d{1,5})$/.exec(name);
    return m && m[1] === this.name ? Number(m[2]) : undefined;
  }

  private allocate(): number {
    // Round the ring rather than reuse the lowest free index: a new sandbox
    // does not get an address whose connections may still be in conntrack.
    for (let k = 0; k < this.capacity; k++) {
      const i = (this.cursor + k) % this.capacity;
      if (!this.used.has(i)) {
        this.used.add(i);
        this.cursor = i + 1;
        return i;
      }
    }
    throw new RuntimeError('unavailable', `all ${this.capacity} network slots of ${this.subnet.text} are in use`);
  }

  private async makeSlot(index: number): Promise<Slot> {
    const slot = this.slotAt(index);
    try {
      await this.host.ip(['netns', 'add', slot.name]);
      // Before the veth arrives, so that its end never gets an IPv6 address.
      // The sandbox's root is not root of this namespace: these let it bind
      // ports under 1024 and ping.
      await this.host.inNetns(join(NETNS_DIR, slot.name), 'sysctl', [
        '-e', '-q', '-w',
        'net.ipv6.conf.all.disable_ipv6=1',
        'net.ipv6.conf.default.disable_ipv6=1',
        'net.ipv4.ip_unprivileged_port_start=0',
        'net.ipv4.ping_group_range=0 2147483647',
      ]);
      await this.linkUp(slot);
      return slot;
    } catch (err) {
      await this.destroySlot(slot);
      throw new RuntimeError('internal', `could not make network slot ${slot.name}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The veth pair, its addresses and the sandbox's default route. */
  private async linkUp(slot: Slot): Promise<void> {
    await this.host.ipBatch([
      `link add ${slot.iface} type veth peer name ${SANDBOX_INTERFACE} netns ${slot.name}`,
      ...(this.mtu ? [`link set ${slot.iface} mtu ${this.mtu}`] : []),
      `addr add ${slot.gateway}/${SLOT_PREFIX} dev ${slot.iface}`,
      `link set ${slot.iface} up`,
    ]);
    await this.host.ipBatch([
      'link set lo up',
      ...(this.mtu ? [`link set ${SANDBOX_INTERFACE} mtu ${this.mtu}`] : []),
      `addr add ${slot.address}/${SLOT_PREFIX} dev ${SANDBOX_INTERFACE}`,
      `link set ${SANDBOX_INTERFACE} up`,
      `route add default via ${slot.gateway}`,
    ], slot.name);
  }

  /** A pooled slot whose namespace is still there: one removed behind this process's back is dropped. */
  private async fromPool(): Promise<Slot | undefined> {
    for (let slot = this.pool.shift(); slot; slot = this.pool.shift()) {
      if (existsSync(join(NETNS_DIR, slot.name))) return slot;
      if (slot.inTable && this.spec) await this.nft(slotRemoveScript(this.spec, slot), `remove pooled network slot ${slot.name}`).catch(() => undefined);
      await this.destroySlot(slot).catch(() => this.used.delete(slot!.index));
    }
    return undefined;
  }

  /** Removes a slot's veth (both ends) and namespace, whatever of them exists. */
  private async destroySlot(slot: Slot): Promise<void> {
    try {
      // The usual case: both are there.
      await this.host.ipBatch([`link del ${slot.iface}`, `netns del ${slot.name}`]);
      this.used.delete(slot.index);
      return;
    } catch {
      // Some of it is missing: remove what is there.
    }
    const links = new Set((await this.host.links()).map((l) => l.ifname));
    const namespaces = new Set(await this.host.netnsNames());
    await this.remove(links.has(slot.iface) ? [slot.iface] : [], namespaces.has(slot.name) ? [slot.name] : []);
    this.used.delete(slot.index);
  }

  private async remove(ifaces: string[], namespaces: string[]): Promise<void> {
    const lines = [...ifaces.map((i) => `link del ${i}`), ...namespaces.map((n) => `netns del ${n}`)];
    if (lines.length) await this.host.ipBatch(lines);
  }

  private fillPool(): void {
    if (this.filling || this.closed || !this.spec || this.pool.length >= this.poolSize) return;
    const fill = (async () => {
      try {
        while (!this.closed && this.pool.length < this.poolSize) {
          // A boot began meanwhile: the rest waits until it is over.
          if (!this.idle()) {
            this.refillSoon();
            break;
          }
          const slot = await this.makeSlot(this.allocate());
          // In the table ahead, with the default rules, off the path of the create that takes it.
          try {
            await this.nft(slotAddScript(this.table(), slot, DEFAULT_RULES), `add pooled network slot ${slot.name}`);
          } catch (err) {
            await this.destroySlot(slot);
            throw err;
          }
          slot.inTable = true;
          this.pool.push(slot);
        }
        this.poolError = undefined;
      } catch (err) {
        this.poolError = err as Error;
        this.log.error({ err }, 'network slot pool fill failed');
      }
    })().finally(() => {
      if (this.filling === fill) this.filling = undefined;
    });
    this.filling = fill;
  }

  // ------------------------------------------------------------------ rules

  private async nft(script: string, what: string): Promise<void> {
    await this.nftQueue.run('nft', async () => {
      try {
        await this.host.nft(script);
      } catch (err) {
        const detail = err instanceof CommandError ? err.stderr.trim() : (err as Error).message;
        throw new RuntimeError('internal', `nftables refused to ${what}: ${detail}`, { cause: err });
      }
    });
  }

  private checkRedirect(slot: Slot, rules: NormalizedRules): void {
    const web = rules.redirectWeb;
    if (!web) return;
    const gateway = web.address === 'gateway' || web.address === slot.gateway;
    for (const port of [web.httpPort, web.tlsPort]) {
      const open = this.services.some((s) => (s.address === web.address || (s.address === 'gateway' && gateway)) && s.tcpPorts.includes(port));
      if (!open) throw new RuntimeError('invalid', `redirectWeb goes to ${web.address}:${port}, which is not a host service sandboxes may reach`);
    }
  }

  private async checkServices(services: HostService[]): Promise<void> {
    const fixed = services.filter((s) => s.address !== 'gateway');
    if (!fixed.length) return;
    const local = new Set((await this.host.addresses()).map((a) => a.local));
    for (const s of fixed) if (!local.has(s.address)) throw new RuntimeError('invalid', `host service address ${s.address} is not an address of this host`);
  }

  /**
   * Aborts the sandbox's TCP connections that its rules now deny. The
   * filter resets them on their next packet anyway; this reaches the ones
   * that send nothing (a client waiting for data) and tells the far end.
   */
  private async cutDenied(h: Held): Promise<void> {
    // Rules that deny nothing of their own deny nothing that was allowed before: the always-denied ranges do not change.
    if (h.rules.allowInternet && !h.rules.denyOut.some((c) => c.family === 4)) return;
    const path = join(NETNS_DIR, h.slot.name);
    // A socket in TIME-WAIT has nothing left to cut.
    const states = ['state', 'connected', 'exclude', 'time-wait'];
    const listed = await this.host.inNetns(path, 'ss', ['-t', '-n', '-H', ...states]);
    const scope = { sandboxes: this.subnet, allowedPrivate: this.allowedPrivate };
    const exempt = new Set([h.slot.gateway, ...this.services.map((s) => s.address)]);
    const peers = new Set<string>();
    for (const line of listed.split('\n')) {
      const peer = line.trim().split(/\s+/).at(-1);
      const m = peer && /^\[?(?:::ffff:)?(\d+\.\d+\.\d+\.\d+)\]?:(\d+)$/.exec(peer);
      if (!m || exempt.has(m[1]!) || m[1]!.startsWith('127.')) continue;
      if (egressVerdict(h.rules, scope, m[1]!, Number(m[2])) === 'deny') peers.add(m[1]!);
    }
    if (!peers.size) return;
    const filter = [...peers].flatMap((p, i) => [...(i ? ['or'] : []), 'dst', p]);
    await this.host.inNetns(path, 'ss', ['-K', '-t', '-n', ...states, '(', ...filter, ')']);
  }

  // ------------------------------------------------------------------ state

  private heldOf(sandboxId: string): Held {
    const h = this.held.get(sandboxId);
    if (!h) throw new RuntimeError('not_found', `sandbox ${sandboxId} has no network`);
    return h;
  }

  private view(h: Held): SandboxNetwork {
    return {
      sandboxId: h.sandboxId,
      netnsPath: join(NETNS_DIR, h.slot.name),
      netnsName: h.slot.name,
      hostInterface: h.slot.iface,
      interface: SANDBOX_INTERFACE,
      address: h.slot.address,
      gateway: h.slot.gateway,
      prefixLength: SLOT_PREFIX,
      rules: rulesOf(h.rules),
    };
  }

  private recordPath(index: number): string {
    return join(this.stateDir, 'slots', `${index}.json`);
  }

  private async writeRecord(h: Held): Promise<void> {
    const record: SlotRecord = { index: h.slot.index, sandboxId: h.sandboxId, rules: rulesOf(h.rules) };
    const path = this.recordPath(h.slot.index);
    await writeFile(`${path}.tmp`, JSON.stringify(record) + '\n');
    await rename(`${path}.tmp`, path);
  }

  private async readRecords(): Promise<SlotRecord[]> {
    const out: SlotRecord[] = [];
    for (const f of await readdirOrEmpty(join(this.stateDir, 'slots'))) {
      const path = join(this.stateDir, 'slots', f);
      if (!/^\d+\.json$/.test(f)) {
        await rm(path, { force: true });
        continue;
      }
      const rec = JSON.parse(await readFile(path, 'utf8')) as SlotRecord;
      if (rec.index !== Number(f.slice(0, -5)) || !SANDBOX_ID.test(rec.sandboxId)) throw new RuntimeError('internal', `slot record ${path} is not one this network wrote`);
      out.push(rec);
    }
    return out;
  }

  /** Records of one subnet are not adopted into another: the addresses in them would not fit. */
  private async checkState(): Promise<void> {
    await mkdir(join(this.stateDir, 'slots'), { recursive: true });
    const path = join(this.stateDir, 'network.json');
    const want = { name: this.name, subnet: this.subnet.text };
    let had: typeof want | undefined;
    try {
      had = JSON.parse(await readFile(path, 'utf8')) as typeof want;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (had && (had.name !== want.name || had.subnet !== want.subnet) && (await readdirOrEmpty(join(this.stateDir, 'slots'))).length) {
      throw new RuntimeError('conflict', `${this.stateDir} holds sandbox networks of '${had.name}' on ${had.subnet}, not '${want.name}' on ${want.subnet}: release them (or remove everything) before changing either`);
    }
    await writeFile(path, JSON.stringify(want) + '\n');
  }
}

function checkSandboxId(id: string): void {
  if (typeof id !== 'string' || !SANDBOX_ID.test(id)) throw new RuntimeError('invalid', `sandbox id ${JSON.stringify(id)} is not one`);
}

function normalizeServices(services: HostServiceOptions[]): HostService[] {
  if (!Array.isArray(services)) throw new RuntimeError('invalid', 'hostServices must be a list');
  return services.map((s, i) => {
    const where = `hostServices[${i}]`;
    const address = s?.address === 'gateway' || s?.address === 'service' ? s.address : parseIpv4(s?.address, `${where} address`);
    const ports = (list: unknown, kind: string) => {
      if (list === undefined) return [];
      if (!Array.isArray(list)) throw new RuntimeError('invalid', `${where} ${kind} must be a list of ports`);
      return [...new Set(list.map((p) => parsePort(p, `${where} ${kind} entry`)))];
    };
    return { address, tcpPorts: ports(s.tcpPorts, 'tcpPorts'), udpPorts: ports(s.udpPorts, 'udpPorts') };
  });
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

function parseCidrOrUndefined(text: string): Cidr | undefined {
  try {
    return parseCidr(text, 'address');
  } catch {
    return undefined;
  }
}

async function readState(stateDir: string): Promise<{ name?: string; subnet?: string } | undefined> {
  try {
    return JSON.parse(await readFile(join(stateDir, 'network.json'), 'utf8')) as { name?: string; subnet?: string };
  } catch {
    return undefined;
  }
}

/** Whether the network state at `stateDir` still holds a claim. */
async function holderKeeps(stateDir: string, mine: (state: { name?: string; subnet?: string }) => boolean): Promise<boolean> {
  const state = await readState(stateDir);
  return state !== undefined && mine(state);
}
