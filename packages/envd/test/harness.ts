// Starts the built envd (dist/main.js) as a real process for a test: on a
// free port, with a temporary directory holding the users' homes and the
// passwd/group files it reads, and an access token.
import { createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Filesystem, Process } from '@paddock/models';

export const envdMain = join(import.meta.dirname, '../dist/main.js');

export interface RunningEnvd {
  url: string;
  port: number;
  pid: number;
  /** Temporary directory: homes under home/, the users' files, scratch space under work/. */
  dir: string;
  home: { root: string; user: string };
  token: string | undefined;
  logs: string[];
  child: ChildProcess;
  stop(): Promise<void>;
}

export interface EnvdStartOptions {
  token?: string | null;
  port?: number;
  extraArgs?: string[];
}

export async function startEnvd(opts: EnvdStartOptions = {}): Promise<RunningEnvd> {
  const dir = mkdtempSync(join(tmpdir(), 'envd-test-'));
  // mkdtemp makes it 0700; the test users must be able to reach their homes.
  chmodSync(dir, 0o755);
  const home = { root: join(dir, 'home/root'), user: join(dir, 'home/user') };
  mkdirSync(home.root, { recursive: true });
  mkdirSync(home.user, { recursive: true });
  chownSync(home.user, 1000, 1000);
  mkdirSync(join(dir, 'work'), { mode: 0o777 });
  writeFileSync(join(dir, 'passwd'), `root:x:0:0:root:${home.root}:/bin/bash\nuser:x:1000:1000::${home.user}:/bin/bash\n`);
  writeFileSync(join(dir, 'group'), 'root:x:0:\nuser:x:1000:\n');
  const token = opts.token === null ? undefined : (opts.token ?? 'test-token');
  const args = [
    envdMain,
    '--port',
    String(opts.port ?? 0),
    '--passwd-file',
    join(dir, 'passwd'),
    '--group-file',
    join(dir, 'group'),
    ...(token ? ['--access-token', token] : []),
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const logs: string[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    const rl = createInterface({ input: child.stderr! });
    rl.on('line', (line) => {
      logs.push(line);
      try {
        const msg = JSON.parse(line) as { msg?: string; port?: number };
        if (msg.msg === 'ready' && msg.port) resolve(msg.port);
      } catch {
        // not JSON: keep it in the log
      }
    });
    child.once('exit', (code) => reject(new Error(`envd exited with ${code} before it was ready:\n${logs.join('\n')}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    dir,
    home,
    token,
    logs,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        // A test that found envd misbehaving must not leave it running.
        const escalate = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(escalate);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

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
