// Egress rules of a sandbox: `allowOut` entries are CIDR blocks, IP
// addresses or domain names (a leading `*.` allowed); `denyOut` entries are
// CIDR blocks or IP addresses. Checked here so that a bad entry is a 400
// naming it; the runtime enforces them.
import { isIP } from 'node:net';
import { badRequest } from './errors.js';

function isCidr(s: string): boolean {
  const slash = s.indexOf('/');
  if (slash < 0) return false;
  const ip = s.slice(0, slash);
  const bits = s.slice(slash + 1);
  const family = isIP(ip);
  if (!family || !/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

function isDomain(s: string): boolean {
  const name = s.startsWith('*.') ? s.slice(2) : s;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  return labels.length >= 1 && labels.every((l) => LABEL.test(l)) && !/^\d+$/.test(labels.at(-1)!);
}

/**
 * The Host a sandbox's ports see in place of the client's: a host name or
 * address with an optional port, `${PORT}` standing for the port; nothing
 * that could end the header it goes in.
 */
export function validateMaskRequestHost(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 255 || !/^[A-Za-z0-9.:_\-[\]]+$/.test(value.replaceAll('${PORT}', '1'))) {
    throw badRequest(`maskRequestHost '${String(value).slice(0, 64)}' is not a host (letters, digits, '.', '-', ':', '[', ']', and \${PORT} for the port)`);
  }
  return value;
}

export function validateEgress(field: 'allowOut' | 'denyOut', entries: string[] | undefined, max: number): string[] | undefined {
  if (entries === undefined) return undefined;
  if (entries.length > max) throw badRequest(`${field} has ${entries.length} entries; at most ${max} are allowed`);
  entries.forEach((raw, i) => {
    const e = raw.trim();
    if (isIP(e) || isCidr(e)) return;
    if (field === 'allowOut' && isDomain(e)) return;
    const what = field === 'allowOut' ? 'a CIDR block, an IP address or a domain name' : 'a CIDR block or an IP address (domains are allowed only in allowOut)';
    throw badRequest(`${field}[${i}] '${raw}' is not ${what}`);
  });
  return entries.map((e) => e.trim());
}
