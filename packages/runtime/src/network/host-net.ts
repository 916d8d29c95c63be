// What this layer asks of the host: iproute2, nft and ss processes, each
// bounded in time, and what they report read as JSON where they offer it.
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { run } from '../exec.js';
import { RuntimeError } from '../runtime.js';

/** Where `ip netns` keeps its namespaces: a slot's namespace is the file `NETNS_DIR/NAME`. */
export const NETNS_DIR = '/run/netns';
/** The host's own (this process's namespace's) IPv4 forwarding switch. */
const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';

export class HostNet {
  constructor(private readonly timeoutMs: number) {}

  /** Refuses, naming the Debian packages, when a program this layer runs is missing. */
  async checkTools(): Promise<void> {
    const missing: string[] = [];
    for (const [cmd, args, pkg] of [
      ['nft', ['--version'], 'nftables'],
      ['ip', ['-V'], 'iproute2'],
      ['ss', ['-V'], 'iproute2'],
      ['nsenter', ['--version'], 'util-linux'],
    ] as const) {
      try {
        await run(cmd, [...args], { timeoutMs: this.timeoutMs });
      } catch {
        missing.push(`${cmd} (${pkg})`);
      }
    }
    if (missing.length) {
      throw new RuntimeError('unavailable', `sandbox networking needs ${missing.join(', ')}: install them (apt-get install -y nftables iproute2 util-linux), or turn sandbox networking off`);
    }
  }

  async ip(args: string[], netns?: string): Promise<string> {
    return (await run('ip', [...(netns ? ['-n', netns] : []), ...args], { timeoutMs: this.timeoutMs })).stdout;
  }

  /** Several `ip` commands in one process; the first that fails stops it and names its line. */
  async ipBatch(lines: string[], netns?: string): Promise<void> {
    await run('ip', [...(netns ? ['-n', netns] : []), '-batch', '-'], { timeoutMs: this.timeoutMs, input: lines.join('\n') + '\n' });
  }

  /** Applies a script as one transaction: all of it or nothing. */
  async nft(script: string): Promise<void> {
    await run('nft', ['-f', '-'], { timeoutMs: this.timeoutMs, input: script });
  }

  async hasTable(name: string): Promise<boolean> {
    const out = JSON.parse((await run('nft', ['-j', 'list', 'tables', 'inet'], { timeoutMs: this.timeoutMs })).stdout) as { nftables: Array<{ table?: { name: string } }> };
    return out.nftables.some((e) => e.table?.name === name);
  }

  /** Runs a program with the network namespace at `path` (the host's mount and pid namespaces stay). */
  async inNetns(path: string, cmd: string, args: string[]): Promise<string> {
    return (await run('nsenter', [`--net=${path}`, cmd, ...args], { timeoutMs: this.timeoutMs })).stdout;
  }

  async netnsNames(): Promise<string[]> {
    try {
      return await readdir(NETNS_DIR);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  async links(): Promise<Array<{ ifname: string; mtu?: number }>> {
    return JSON.parse(await this.ip(['-j', 'link', 'show'])) as Array<{ ifname: string; mtu?: number }>;
  }

  /** The host's IPv4 addresses with their interfaces. */
  async addresses(): Promise<Array<{ ifname: string; local: string }>> {
    const links = JSON.parse(await this.ip(['-j', '-4', 'addr', 'show'])) as Array<{ ifname: string; addr_info?: Array<{ local?: string }> }>;
    return links.flatMap((l) => (l.addr_info ?? []).flatMap((a) => (a.local ? [{ ifname: l.ifname, local: a.local }] : [])));
  }

  /** The IPv4 routes of the main table. */
  async routes(): Promise<Array<{ dst: string; dev?: string }>> {
    return JSON.parse(await this.ip(['-j', '-4', 'route', 'show'])) as Array<{ dst: string; dev?: string }>;
  }

  /** The interface of the default route. */
  async defaultUplink(): Promise<string> {
    const dev = (await this.routes()).find((r) => r.dst === 'default')?.dev;
    if (!dev) throw new RuntimeError('unavailable', 'the host has no IPv4 default route: name the uplink interface for sandbox traffic');
    return dev;
  }

  async ipForwarding(): Promise<boolean> {
    return (await readFile(IP_FORWARD, 'utf8')).trim() === '1';
  }

  async enableIpForwarding(): Promise<void> {
    await writeFile(IP_FORWARD, '1\n');
  }
}
