// A network per sandbox: its own network namespace, joined to the host by a
// veth pair with a /30 of its own, NAT out of the host's uplink, and its
// egress rules in Paddock's nftables table. Namespaces are made ahead in a
// pool, so that handing one to a sandbox costs one nftables transaction.
//
// A slot handed to a sandbox is recorded in stateDir; the next process on
// the same stateDir adopts it, and removes whatever else of this network it
// finds (pooled and half-made slots).
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CommandError } from '../exec.js';
import { RuntimeError } from '../runtime.js';
import { KeyedMutex, SANDBOX_ID } from '../util.js';
import { egressVerdict, intToIpv4, normalizeRules, overlaps, parseCidr, parseIpv4, parsePort, rulesOf, type Cidr, type AddressRules, type NormalizedRules } from './addresses.js';
import { HostNet, NETNS_DIR } from './host-net.js';
import { servicesScript, slotAddScript, slotRemoveScript, slotRulesScript, tableScript, type HostService, type SlotRef, type TableSpec } from './nft-script.js';

export const DEFAULT_NETWORK_NAME = 'paddock';
/** Chosen away from the defaults of Docker (172.17/16), Podman (10.88/16, 10.89/24...) and common Kubernetes pod and service ranges. */
export const DEFAULT_SANDBOX_SUBNET = '10.213.0.0/16';
export const DEFAULT_NETWORK_POOL_SIZE = 4;
/** The interface a sandbox sees; every slot's is called so. */
export const SANDBOX_INTERFACE = 'eth0';
const SLOT_PREFIX = 30;

export interface HostServiceOptions {
  /** An IPv4 address of the host, or 'gateway' for each sandbox's own gateway (a service listening on 0.0.0.0). */
  address: string;
  tcpPorts?: number[];
  udpPorts?: number[];
}

export interface SandboxNetworksOptions {
  /** A host-only directory of the runtime's, where handed-out slots are recorded. */
  stateDir: string;
  /** The nftables table (`inet NAME`) and the prefix of namespaces and veths (`NAME-INDEX`): 1 to 9 lowercase letters and digits. */
  name?: string;
  /** Cut into one /30 per sandbox; a prefix length from 8 to 28. */
  subnet?: string;
  /** The interface sandbox traffic is masqueraded out of; that of the default route when omitted. */
  uplink?: string;
  /** Parts of the always-denied ranges that sandboxes may reach (on-premises services), their rules permitting. */
  allowedPrivate?: string[];
  /** Slots kept ready; 0 makes each on acquire. */
  poolSize?: number;
  /** Services on the host that sandboxes may reach (the resolver, the egress proxy). */
  hostServices?: HostServiceOptions[];
  /** The bound on each command (ip, nft, ss, sysctl). */
  commandTimeoutMs?: number;
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
  readonly subnet: Cidr;
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
  private closed = false;
  /** Why the last refill stopped short, if it did. */
  poolError: Error | undefined;
  private readonly perSandbox = new KeyedMutex();
  private readonly nftQueue = new KeyedMutex();

  constructor(opts: SandboxNetworksOptions) {
    this.name = opts.name ?? DEFAULT_NETWORK_NAME;
    if (!/^[a-z][a-z0-9]{0,8}$/.test(this.name)) throw new RuntimeError('invalid', `network name ${JSON.stringify(this.name)} must be 1 to 9 lowercase letters and digits, starting with a letter`);
    this.stateDir = opts.stateDir;
    this.subnet = parseCidr(opts.subnet ?? DEFAULT_SANDBOX_SUBNET, 'subnet');
    if (this.subnet.family !== 4 || this.subnet.prefix < 8 || this.subnet.prefix > SLOT_PREFIX - 2) {
      throw new RuntimeError('invalid', `subnet ${this.subnet.text} must be an IPv4 block with a prefix length from 8 to ${SLOT_PREFIX - 2}`);
    }
    this.allowedPrivate = (opts.allowedPrivate ?? []).map((c) => parseCidr(c, 'allowedPrivate'));
    this.poolSize = opts.poolSize ?? DEFAULT_NETWORK_POOL_SIZE;
    if (!Number.isInteger(this.poolSize) || this.poolSize < 0) throw new RuntimeError('invalid', `poolSize ${this.poolSize} must be a whole number, 0 or more`);
    if (opts.uplink !== undefined && !/^[A-Za-z0-9_.-]{1,15}$/.test(opts.uplink)) throw new RuntimeError('invalid', `uplink ${JSON.stringify(opts.uplink)} is not an interface name`);
    this.uplinkOption = opts.uplink;
    this.services = normalizeServices(opts.hostServices ?? []);
    this.host = new HostNet(opts.commandTimeoutMs ?? 10_000);
  }

  private get capacity(): number {
    return 2 ** (SLOT_PREFIX - this.subnet.prefix);
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
    await this.close();
    this.pool.length = 0;
    const uplink = this.uplinkOption ?? (await this.host.defaultUplink());
    const links = await this.host.links();
    const uplinkLink = links.find((l) => l.ifname === uplink);
    if (!uplinkLink) throw new RuntimeError('invalid', `uplink interface '${uplink}' does not exist`);
    if (this.ours(uplink) !== undefined) throw new RuntimeError('invalid', `uplink interface '${uplink}' is one of the sandboxes'`);
    this.mtu = uplinkLink.mtu;
    for (const r of await this.host.routes()) {
      if (r.dst === 'default' || (r.dev !== undefined && this.ours(r.dev) !== undefined)) continue;
      const dst = parseCidr(r.dst, 'route');
      if (overlaps(dst, this.subnet)) throw new RuntimeError('conflict', `the sandboxes' subnet ${this.subnet.text} overlaps the host's route to ${dst.text}${r.dev ? ` on ${r.dev}` : ''}: choose another subnet`);
    }
    await this.checkServices(this.services);
    await this.checkState();
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
      const slot = this.pool.shift() ?? (await this.makeSlot(this.allocate()));
      const h: Held = { slot, sandboxId, rules: normalized };
      this.held.set(sandboxId, h);
      try {
        this.checkRedirect(slot, normalized);
        await this.writeRecord(h);
        await this.nft(slotAddScript(t, slot, normalized), `apply the network rules of sandbox ${sandboxId}`);
      } catch (err) {
        this.held.delete(sandboxId);
        await rm(this.recordPath(slot.index), { force: true });
        await this.destroySlot(slot);
        throw err;
      } finally {
        // After the caller has its slot: a refill's first spawn would otherwise hold up the answer.
        setImmediate(() => this.fillPool());
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
      this.checkRedirect(h.slot, normalized);
      await this.nft(slotRulesScript(this.table(), h.slot, normalized), `apply the network rules of sandbox ${sandboxId}`);
      h.rules = normalized;
      await this.writeRecord(h);
      try {
        await this.cutDenied(h);
      } catch (err) {
        // The rules are in force; a connection left open is reset on its next packet.
        process.emitWarning(`sandbox ${sandboxId}: connections its new rules deny could not be aborted: ${(err as Error).message}`);
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

  /** Resolves once the pool is full, or a refill stopped short (then `poolError` says why). */
  async poolReady(): Promise<void> {
    while (this.filling) await this.filling;
  }

  /** Replaces the host services sandboxes may reach, in one transaction. */
  async setHostServices(services: HostServiceOptions[]): Promise<void> {
    const next = normalizeServices(services);
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
    await this.poolReady();
  }

  /** What of this network is on the host: namespaces, veths, the table, records. Empty after removeEverything(). */
  async leftovers(): Promise<string[]> {
    const out: string[] = [];
    for (const n of await this.host.netnsNames()) if (this.ours(n) !== undefined) out.push(`network namespace ${join(NETNS_DIR, n)}`);
    for (const l of await this.host.links()) if (this.ours(l.ifname) !== undefined) out.push(`interface ${l.ifname}`);
    if (await this.host.hasTable(this.name)) out.push(`nftables table inet ${this.name}`);
    for (const f of await readdirOrEmpty(join(this.stateDir, 'slots'))) out.push(`slot record ${join(this.stateDir, 'slots', f)}`);
    return out;
  }

  /** Removes every namespace, veth and record of this network and its table. IP forwarding stays on. */
  async removeEverything(): Promise<void> {
    await this.close();
    const namespaces = (await this.host.netnsNames()).filter((n) => this.ours(n) !== undefined);
    const ifaces = (await this.host.links()).map((l) => l.ifname).filter((n) => this.ours(n) !== undefined);
    if (await this.host.hasTable(this.name)) await this.nft(`delete table inet ${this.name}\n`, 'remove the sandboxes\' table');
    await this.remove(ifaces, namespaces);
    await rm(join(this.stateDir, 'slots'), { recursive: true, force: true });
    await rm(join(this.stateDir, 'network.json'), { force: true });
    this.held.clear();
    this.pool.length = 0;
    this.used.clear();
    this.spec = undefined;
  }

  // ------------------------------------------------------------------ slots

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
        while (!this.closed && this.pool.length < this.poolSize) this.pool.push(await this.makeSlot(this.allocate()));
        this.poolError = undefined;
      } catch (err) {
        this.poolError = err as Error;
        process.emitWarning(`network slot pool fill failed: ${(err as Error).message}`);
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
    const address = s?.address === 'gateway' ? 'gateway' : parseIpv4(s?.address, `${where} address`);
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
