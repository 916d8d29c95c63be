// envd's tests: a real envd started by tools/testing/local-envd.mjs (with an
// access token unless told otherwise), Connect clients for it, and helpers.
import { ConnectError, createClient, type Code, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { readFileSync, writeFileSync } from 'node:fs';
import { Filesystem, Process } from '@paddock/models';
import { startLocalEnvd, type RunningEnvd } from '../../../tools/testing/local-envd.mjs';

export type { RunningEnvd } from '../../../tools/testing/local-envd.mjs';

export interface EnvdStartOptions {
  /** The access token; `null` for none. */
  token?: string | null;
  port?: number;
  extraArgs?: string[];
  /** The entry point to run, if not the build's. */
  main?: string;
}

export function startEnvd(opts: EnvdStartOptions = {}): Promise<RunningEnvd> {
  const token = opts.token === null ? undefined : (opts.token ?? 'test-token');
  return startLocalEnvd({ prefix: 'envd-test-', token, port: opts.port, extraArgs: opts.extraArgs, main: opts.main });
}

/** Connect's two encodings, named, for `describe.each`: every RPC test runs in both. */
export const CONNECT_FORMATS = [
  ['JSON', false],
  ['binary', true],
] as const;

export interface ClientOptions {
  user?: string;
  token?: string | null;
  binary?: boolean;
  headers?: Record<string, string>;
}

export function transport(envd: RunningEnvd, opts: ClientOptions = {}): Transport {
  const token = opts.token === null ? undefined : (opts.token ?? envd.token);
  const headers: Interceptor = (next) => (req) => {
    if (token) req.header.set('X-Access-Token', token);
    if (opts.user) req.header.set('Authorization', `Basic ${Buffer.from(`${opts.user}:`).toString('base64')}`);
    for (const [k, v] of Object.entries(opts.headers ?? {})) req.header.set(k, v);
    return next(req);
  };
  return createConnectTransport({
    baseUrl: envd.url,
    httpVersion: '1.1',
    useBinaryFormat: opts.binary ?? false,
    interceptors: [headers],
  });
}

export function filesystem(envd: RunningEnvd, opts?: ClientOptions): Client<typeof Filesystem> {
  return createClient(Filesystem, transport(envd, opts));
}

export function processes(envd: RunningEnvd, opts?: ClientOptions): Client<typeof Process> {
  return createClient(Process, transport(envd, opts));
}

/** Resident set size and its peak of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/**
 * Starts the peak that memoryOf reports afresh from the current resident
 * size, so that a measurement sees only what happened after this call.
 */
export function resetPeakMemory(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** Reads a server stream until `until` says stop, returning what was read. */
export async function collect<T>(stream: AsyncIterable<T>, until: (item: T, all: T[]) => boolean = () => false): Promise<T[]> {
  const all: T[] = [];
  for await (const item of stream) {
    all.push(item);
    if (until(item, all)) break;
  }
  return all;
}

/** The code and message of a call that must fail; throws when it succeeds. */
export async function failure(call: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await call;
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
  throw new Error('expected the call to fail');
}
