// The seccomp filter every sandbox process runs under. The policy is data,
// seccomp/profile.json (shipped with the package, versioned on its own);
// this module checks it and turns it into the OCI configuration's
// `linux.seccomp` for this host's architecture, which runc compiles with
// libseccomp. Private to the runtime, no semver.
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { RuntimeError } from './runtime.js';

/** The profile that ships with the package: seccomp/ beside src/ and dist/. */
export const SECCOMP_PROFILE_PATH = join(import.meta.dirname, '..', 'seccomp', 'profile.json');

/** The runtime-spec's `linux.seccomp`, as far as this profile uses it. */
export interface OciSeccomp {
  defaultAction: 'SCMP_ACT_ERRNO';
  defaultErrnoRet: number;
  architectures: string[];
  syscalls: OciSyscallRule[];
}

export interface OciSyscallRule {
  names: string[];
  action: 'SCMP_ACT_ALLOW' | 'SCMP_ACT_ERRNO';
  errnoRet?: number;
  /** Conditions on the call's arguments; all must hold. */
  args?: { index: number; value: number; valueTwo: number; op: 'SCMP_CMP_EQ' | 'SCMP_CMP_NE' | 'SCMP_CMP_MASKED_EQ' }[];
}

/** A checked profile: errno names resolved to numbers, flag and value labels to numbers. */
export interface SeccompProfile {
  name: string;
  version: number;
  defaultErrno: number;
  allow: { group: string; architectures?: string[]; syscalls: string[] }[];
  allowWhen: { syscall: string; argument: number; test: 'noneOf' | 'oneOf' | 'not'; values: number[] }[];
  refuse: { group: string; errno: number; syscalls: string[] }[];
}

/**
 * The ABIs a host's kernel runs, by Node's name for its architecture: the
 * native one first, then the compat ones. A filter that left a compat ABI
 * out would let a 32-bit program call what the 64-bit one may not.
 */
const ARCHITECTURES: Record<string, { kernel: string; abis: string[] }> = {
  x64: { kernel: 'x86_64', abis: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
  arm64: { kernel: 'aarch64', abis: ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'] },
};
const KERNEL_ARCHES = new Set(Object.values(ARCHITECTURES).map((a) => a.kernel));
const SYSCALL_NAME = /^[a-z_][a-z0-9_]*$/;
/** Six syscall arguments, indexed from 0. */
const MAX_ARGUMENT = 5;

let cached: OciSeccomp | undefined;

/** `linux.seccomp` for sandboxes on this host; the profile is read on the first call only. */
export function sandboxSeccomp(): OciSeccomp {
  cached ??= seccompFor(loadSeccompProfile(SECCOMP_PROFILE_PATH), process.arch);
  return cached;
}

/** Reads and checks a profile; a missing or malformed file is an error that names it and what is wrong. */
export function loadSeccompProfile(path: string): SeccompProfile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new RuntimeError('internal', `seccomp profile '${path}' cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)}): sandboxes do not start without it; the runtime package is incomplete`, { cause: err });
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new RuntimeError('internal', `seccomp profile '${path}' is not JSON: ${(err as Error).message}`, { cause: err });
  }
  return parseProfile(data, (what) => new RuntimeError('internal', `seccomp profile '${path}': ${what}`));
}

/** The OCI object for one host architecture (Node's `process.arch` spelling). */
export function seccompFor(profile: SeccompProfile, arch: string): OciSeccomp {
  const host = ARCHITECTURES[arch];
  if (!host) {
    throw new RuntimeError('unavailable', `no seccomp filter for host architecture '${arch}': sandboxes run on ${Object.values(ARCHITECTURES).map((a) => a.kernel).join(' and ')} hosts only`);
  }
  const syscalls: OciSyscallRule[] = [];
  for (const g of profile.allow) {
    if (!g.architectures || g.architectures.includes(host.kernel)) syscalls.push({ names: g.syscalls, action: 'SCMP_ACT_ALLOW' });
  }
  for (const c of profile.allowWhen) {
    const names = [c.syscall];
    if (c.test === 'noneOf') {
      // SCMP_CMP_MASKED_EQ: (arg & value) == valueTwo.
      const mask = c.values.reduce((m, v) => m | BigInt(v), 0n);
      syscalls.push({ names, action: 'SCMP_ACT_ALLOW', args: [{ index: c.argument, value: Number(mask), valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] });
    } else if (c.test === 'oneOf') {
      // One rule per value: the conditions within a rule must all hold.
      for (const v of c.values) syscalls.push({ names, action: 'SCMP_ACT_ALLOW', args: [{ index: c.argument, value: v, valueTwo: 0, op: 'SCMP_CMP_EQ' }] });
    } else {
      syscalls.push({ names, action: 'SCMP_ACT_ALLOW', args: [{ index: c.argument, value: c.values[0]!, valueTwo: 0, op: 'SCMP_CMP_NE' }] });
    }
  }
  // Refusals with the default errno are the default already: the profile
  // lists them to say why, and runc would drop such a rule anyway.
  for (const g of profile.refuse) {
    if (g.errno !== profile.defaultErrno) syscalls.push({ names: g.syscalls, action: 'SCMP_ACT_ERRNO', errnoRet: g.errno });
  }
  return { defaultAction: 'SCMP_ACT_ERRNO', defaultErrnoRet: profile.defaultErrno, architectures: host.abis, syscalls };
}

function parseProfile(data: unknown, fail: (what: string) => Error): SeccompProfile {
  const seen = new Map<string, string>();
  const syscallList = (v: unknown, where: string): string[] => {
    if (!Array.isArray(v) || v.length === 0) throw fail(`${where}.syscalls must be a non-empty list of syscall names`);
    for (const name of v) {
      if (typeof name !== 'string' || !SYSCALL_NAME.test(name)) throw fail(`${where}.syscalls has ${JSON.stringify(name)}, which is not a syscall name`);
      const before = seen.get(name);
      if (before) throw fail(`syscall '${name}' is in both ${before} and ${where}: each syscall gets one rule`);
      seen.set(name, where);
    }
    return v as string[];
  };
  const text = (v: unknown, where: string): string => {
    if (typeof v !== 'string' || v.trim() === '') throw fail(`${where} must be a non-empty string`);
    return v;
  };
  const errno = (v: unknown, where: string): number => {
    const n = typeof v === 'string' ? (constants.errno as Record<string, number>)[v] : undefined;
    if (n === undefined) throw fail(`${where} is ${JSON.stringify(v)}, not an errno name such as "EPERM"`);
    return n;
  };
  const list = (v: unknown, where: string): Record<string, unknown>[] => {
    if (!Array.isArray(v) || !v.every(isObject)) throw fail(`${where} must be a list of objects`);
    return v;
  };
  /** A flag or value: a number, or a string in decimal or 0x-hex, that fits in 64 bits and in a JSON number. */
  const values = (v: unknown, where: string): number[] => {
    if (!isObject(v) || Object.keys(v).length === 0) throw fail(`${where} must be an object of labelled values`);
    return Object.entries(v).map(([label, raw]) => {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^(0x[0-9a-f]+|[0-9]+)$/i.test(raw) ? Number(raw) : NaN;
      if (!Number.isSafeInteger(n) || n < 0) throw fail(`${where}.${label} is ${JSON.stringify(raw)}, not a non-negative integer`);
      return n;
    });
  };

  if (!isObject(data)) throw fail('the top level must be an object');
  const version = data.version;
  if (!Number.isInteger(version) || (version as number) < 1) throw fail(`version must be a positive integer, not ${JSON.stringify(version)}`);
  if (!isObject(data.default)) throw fail('default must be an object with the errno every other syscall gets');
  const profile: SeccompProfile = {
    name: text(data.name, 'name'),
    version: version as number,
    defaultErrno: errno(data.default.errno, 'default.errno'),
    allow: list(data.allow, 'allow').map((g, i) => {
      const where = `allow[${i}] (${String(g.group)})`;
      text(g.group, `allow[${i}].group`);
      text(g.reason, `${where}.reason`);
      const arches = g.architectures;
      if (arches !== undefined && (!Array.isArray(arches) || arches.length === 0 || !arches.every((a) => KERNEL_ARCHES.has(a)))) {
        throw fail(`${where}.architectures must list some of ${[...KERNEL_ARCHES].join(', ')}`);
      }
      return { group: g.group as string, ...(arches ? { architectures: arches as string[] } : {}), syscalls: syscallList(g.syscalls, where) };
    }),
    allowWhen: list(data.allowWhen, 'allowWhen').map((c, i) => {
      const where = `allowWhen[${i}] (${String(c.syscall)})`;
      const [syscall] = syscallList([c.syscall], where);
      text(c.reason, `${where}.reason`);
      const argument = c.argument;
      if (!Number.isInteger(argument) || (argument as number) < 0 || (argument as number) > MAX_ARGUMENT) throw fail(`${where}.argument must be an argument index from 0 to ${MAX_ARGUMENT}`);
      const tests = (['noneOf', 'oneOf', 'not'] as const).filter((t) => c[t] !== undefined);
      if (tests.length !== 1) throw fail(`${where} must have exactly one of noneOf, oneOf and not`);
      const test = tests[0]!;
      const vals = values(c[test], `${where}.${test}`);
      // runc reads two conditions on one argument as "either", which for
      // "not equal" would allow everything.
      if (test === 'not' && vals.length !== 1) throw fail(`${where}.not must hold exactly one value`);
      return { syscall: syscall!, argument: argument as number, test, values: vals };
    }),
    refuse: list(data.refuse, 'refuse').map((g, i) => {
      const where = `refuse[${i}] (${String(g.group)})`;
      text(g.group, `refuse[${i}].group`);
      text(g.reason, `${where}.reason`);
      return { group: g.group as string, errno: errno(g.errno, `${where}.errno`), syscalls: syscallList(g.syscalls, where) };
    }),
  };
  if (profile.allow.length === 0) throw fail('allow is empty: no sandbox process could run');
  return profile;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
