// The nftables scripts of Paddock's table. Every value written here is a
// validated address, a port number, a slot index or an interface name this
// module made: nothing a caller typed reaches the script unchecked.
//
// Traffic of a sandbox is judged by the chains of its slot, reached through
// verdict maps keyed by (host-side veth, sandbox address): a packet whose
// source is not the address of the veth it came in on matches no element
// and is dropped. A slot's rules are one group (two sets, three chains) that
// one transaction flushes and refills.
import { ALWAYS_DENIED_V4, type Cidr, type NormalizedRules } from './addresses.js';

export interface HostService {
  /** An IPv4 address of the host, or 'gateway': each sandbox's own gateway (a service listening on 0.0.0.0). */
  address: string;
  tcpPorts: number[];
  udpPorts: number[];
}

export interface TableSpec {
  /** The table's name, also the prefix of the slots' namespaces and veths (`NAME-INDEX`). */
  name: string;
  subnet: Cidr;
  uplink: string;
  allowedPrivate: Cidr[];
  services: HostService[];
}

export interface SlotRef {
  index: number;
  /** The host's end of the veth pair. */
  iface: string;
  /** The sandbox's address. */
  address: string;
  /** The host end's address. */
  gateway: string;
}

const elements = (items: string[]) => `{ ${items.join(', ')} }`;
const key = (slot: SlotRef) => `"${slot.iface}" . ${slot.address}`;
const v4 = (list: Cidr[]) => list.filter((c) => c.family === 4).map((c) => c.text);

function serviceElements(services: HostService[], gateway: boolean): string[] {
  const out: string[] = [];
  for (const s of services) {
    if ((s.address === 'gateway') !== gateway) continue;
    const at = gateway ? '' : `${s.address} . `;
    for (const p of s.tcpPorts) out.push(`${at}tcp . ${p}`);
    for (const p of s.udpPorts) out.push(`${at}udp . ${p}`);
  }
  return out;
}

/** The table and its base chains, replaced whole in one transaction, with the given slots' groups. */
export function tableScript(t: TableSpec, slots: Array<{ slot: SlotRef; rules: NormalizedRules }>): string {
  const T = t.name;
  const pattern = `"${T}-*"`;
  const interval = 'flags interval; auto-merge;';
  const withElements = (items: string[]) => (items.length ? ` elements = ${elements(items)};` : '');
  const lines = [
    // Creating before deleting makes the delete valid when there is no table yet.
    `table inet ${T} {}`,
    `delete table inet ${T}`,
    `table inet ${T} {`,
    `  set always_denied { type ipv4_addr; ${interval}${withElements(ALWAYS_DENIED_V4)} }`,
    `  set allowed_private { type ipv4_addr; ${interval}${withElements(v4(t.allowedPrivate))} }`,
    `  set sources { type ifname . ipv4_addr; }`,
    `  set services { type ipv4_addr . inet_proto . inet_service;${withElements(serviceElements(t.services, false))} }`,
    `  set gateway_services { type inet_proto . inet_service;${withElements(serviceElements(t.services, true))} }`,
    `  map egress { type ifname . ipv4_addr : verdict; }`,
    `  map ingress { type ifname . ipv4_addr : verdict; }`,
    `  map redirects { type ifname . ipv4_addr : verdict; }`,
    // A reset the kernel sends for a connection it is cutting goes out, so
    // that the far end learns of the cut too; sandboxes cannot forge packets
    // (they have no CAP_NET_RAW in a namespace they do not own).
    `  chain refuse {`,
    `    tcp flags & rst == rst ct state established accept`,
    `    meta l4proto tcp reject with tcp reset`,
    `    reject with icmpx admin-prohibited`,
    `  }`,
    `  chain forward_filter {`,
    `    type filter hook forward priority filter; policy accept;`,
    `    iifname ${pattern} jump from_sandbox`,
    `    oifname ${pattern} jump to_sandbox`,
    `  }`,
    // Sandboxes have no IPv6: what a sandbox sends over it goes nowhere.
    // A destination rewritten by another table's DNAT is not judged on its
    // way out: our own redirects go to the host (input), never forward.
    `  chain from_sandbox {`,
    `    meta nfproto ipv6 drop`,
    `    ct status dnat drop`,
    `    iifname . ip saddr vmap @egress`,
    `    drop`,
    `  }`,
    // Nothing but answers enters a sandbox from outside the host; answers
    // are judged again by the source, so that a peer cut by new rules gets a
    // reset on its next packet.
    `  chain to_sandbox {`,
    `    meta nfproto ipv6 drop`,
    `    ct state related accept`,
    `    ct state != established drop`,
    `    oifname . ip daddr vmap @ingress`,
    `    drop`,
    `  }`,
    `  chain input_filter {`,
    `    type filter hook input priority filter; policy accept;`,
    `    iifname ${pattern} jump sandbox_to_host`,
    `  }`,
    // The host's own connections into a sandbox (the proxy to envd) are
    // answered; a sandbox opens none to the host but its services.
    `  chain sandbox_to_host {`,
    `    ct state established,related accept`,
    `    meta nfproto ipv6 drop`,
    `    iifname . ip saddr != @sources drop`,
    `    ip daddr . meta l4proto . th dport @services accept`,
    `    fib daddr . iif type local meta l4proto . th dport @gateway_services accept`,
    `    goto refuse`,
    `  }`,
    `  chain nat_prerouting {`,
    `    type nat hook prerouting priority dstnat; policy accept;`,
    `    iifname ${pattern} iifname . ip saddr vmap @redirects`,
    `  }`,
    `  chain nat_postrouting {`,
    `    type nat hook postrouting priority srcnat; policy accept;`,
    `    ip saddr ${t.subnet.text} oifname "${t.uplink}" masquerade`,
    `  }`,
    `}`,
  ];
  for (const { slot, rules } of slots) lines.push(slotAddScript(t, slot, rules));
  return lines.join('\n') + '\n';
}

const names = (i: number) => ({ allow: `s${i}_allow`, deny: `s${i}_deny`, out: `s${i}_out`, in: `s${i}_in`, nat: `s${i}_nat` });

/** Makes a slot's group and hooks it into the maps: the sandbox's traffic is judged from then on. */
export function slotAddScript(t: TableSpec, slot: SlotRef, rules: NormalizedRules): string {
  const T = t.name;
  const n = names(slot.index);
  return [
    `add set inet ${T} ${n.allow} { type ipv4_addr; flags interval; auto-merge; }`,
    `add set inet ${T} ${n.deny} { type ipv4_addr; flags interval; auto-merge; }`,
    `add chain inet ${T} ${n.out}`,
    `add chain inet ${T} ${n.in}`,
    `add chain inet ${T} ${n.nat}`,
    slotRulesScript(t, slot, rules).trimEnd(),
    `add element inet ${T} sources { ${key(slot)} }`,
    `add element inet ${T} egress { ${key(slot)} : jump ${n.out} }`,
    `add element inet ${T} ingress { ${key(slot)} : jump ${n.in} }`,
    `add element inet ${T} redirects { ${key(slot)} : jump ${n.nat} }`,
  ].join('\n') + '\n';
}

/**
 * Replaces a slot's rules. The chains end in a verdict of their own: the
 * maps jump to them, and falling off the end would return to the calling
 * chain's drop.
 */
export function slotRulesScript(t: TableSpec, slot: SlotRef, rules: NormalizedRules): string {
  const T = t.name;
  const n = names(slot.index);
  const lines = [`flush chain inet ${T} ${n.out}`, `flush chain inet ${T} ${n.in}`, `flush chain inet ${T} ${n.nat}`, `flush set inet ${T} ${n.allow}`, `flush set inet ${T} ${n.deny}`];
  const allow = v4(rules.allowOut);
  const deny = v4(rules.denyOut);
  if (allow.length) lines.push(`add element inet ${T} ${n.allow} ${elements(allow)}`);
  if (deny.length) lines.push(`add element inet ${T} ${n.deny} ${elements(deny)}`);
  for (const [chain, far] of [[n.out, 'daddr'], [n.in, 'saddr']] as const) {
    const rule = (r: string) => lines.push(`add rule inet ${T} ${chain} ${r}`);
    rule(`ip ${far} ${t.subnet.text} goto refuse`);
    rule(`ip ${far} @always_denied ip ${far} != @allowed_private goto refuse`);
    if (!rules.allowInternet) {
      rule('goto refuse');
      continue;
    }
    rule(`ip ${far} @${n.allow} accept`);
    rule(`ip ${far} @${n.deny} goto refuse`);
    rule('accept');
  }
  const web = rules.redirectWeb;
  if (web && rules.allowInternet) {
    const rule = (r: string) => lines.push(`add rule inet ${T} ${n.nat} ${r}`);
    // Left to the filter: what is refused anyway, and what allowOut lets through by address.
    rule(`ip daddr ${t.subnet.text} return`);
    rule('fib daddr type local return');
    rule('ip daddr @always_denied ip daddr != @allowed_private return');
    rule(`ip daddr @${n.allow} return`);
    const to = web.address === 'gateway' ? slot.gateway : web.address;
    rule(`tcp dport 80 dnat ip to ${to}:${web.httpPort}`);
    rule(`tcp dport 443 dnat ip to ${to}:${web.tlsPort}`);
  }
  return lines.join('\n') + '\n';
}

/** Unhooks a slot and removes its group. */
export function slotRemoveScript(t: TableSpec, slot: SlotRef): string {
  const T = t.name;
  const n = names(slot.index);
  return [
    `delete element inet ${T} sources { ${key(slot)} }`,
    `delete element inet ${T} egress { ${key(slot)} }`,
    `delete element inet ${T} ingress { ${key(slot)} }`,
    `delete element inet ${T} redirects { ${key(slot)} }`,
    `flush chain inet ${T} ${n.out}`,
    `flush chain inet ${T} ${n.in}`,
    `flush chain inet ${T} ${n.nat}`,
    `delete chain inet ${T} ${n.out}`,
    `delete chain inet ${T} ${n.in}`,
    `delete chain inet ${T} ${n.nat}`,
    `delete set inet ${T} ${n.allow}`,
    `delete set inet ${T} ${n.deny}`,
  ].join('\n') + '\n';
}

/** Replaces the host services sandboxes may reach. */
export function servicesScript(t: TableSpec): string {
  const T = t.name;
  const lines = [`flush set inet ${T} services`, `flush set inet ${T} gateway_services`];
  const fixed = serviceElements(t.services, false);
  const gateway = serviceElements(t.services, true);
  if (fixed.length) lines.push(`add element inet ${T} services ${elements(fixed)}`);
  if (gateway.length) lines.push(`add element inet ${T} gateway_services ${elements(gateway)}`);
  return lines.join('\n') + '\n';
}
