// Real sandboxes for tests: a RuncRuntime on a temporary data directory,
// commands run through the sandbox's envd, and a leak check that the
// directory, its mounts, cgroups (the runtime's parent cgroup too) and runc
// state are all gone at the end.
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Filesystem, Process } from '@paddock/models';
import { defaultOciRuntime, OCI_RUNTIMES, RuncRuntime, type OciRuntimeName, type RuncRuntimeOptions } from '../src/index.js';

export const TOKEN = 'runtime-test-token';

/**
 * Images and the base root filesystem, shared by every test's runtime
 * (layers never change once unpacked): `npm test` makes the base once
 * (tools/testing/base-image.mjs), and each data directory only points at it.
 */
export const TEST_CACHE = process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache';
export const sharedImages = { layersDir: process.env.PADDOCK_IMAGES_DIR ?? join(TEST_CACHE, 'layers'), cacheDir: process.env.PADDOCK_CACHE_DIR ?? TEST_CACHE, ...ociRuntimeUnderTest() };

/**
 * Runs the OCI runtime under test with `args` on a test runtime's state
 * (`--root` given here), as the runtime runs it: crun through the
 * legacy-cgroups launcher. Its standard output.
 */
export function ociCall(dataDir: string, args: string[]): string {
  const name = ociRuntimeUnderTest().ociRuntime;
  const argv = ['--root', join(dataDir, name), ...args];
  if (name === 'runc') return execFileSync('runc', argv, { encoding: 'utf8' });
  const crun = execFileSync('sh', ['-c', 'command -v crun'], { encoding: 'utf8' }).trim();
  return execFileSync(join(import.meta.dirname, '../build/Release/paddock-legacy-cgroups'), [crun, ...argv], { encoding: 'utf8' });
}

/**
 * The OCI runtime the tests run containers with: the runtime's default
 * (crun where installed), or what PADDOCK_TEST_OCI_RUNTIME names (CI runs
 * the runtime's suites once more with runc). It goes with `sharedImages`
 * into every test's runtime.
 */
export function ociRuntimeUnderTest(): { ociRuntime: OciRuntimeName } {
  const name = process.env.PADDOCK_TEST_OCI_RUNTIME;
  if (!name) return { ociRuntime: defaultOciRuntime() };
  if (!(OCI_RUNTIMES as readonly string[]).includes(name)) throw new Error(`PADDOCK_TEST_OCI_RUNTIME is '${name}', not one of ${OCI_RUNTIMES.join(', ')}`);
  return { ociRuntime: name as OciRuntimeName };
}

export interface TestRuntime {
  runtime: RuncRuntime;
  dataDir: string;
  /** Destroys every sandbox, releases the host and checks nothing is left. */
  teardown(): Promise<void>;
}

/**
 * `under` is where the data directory is made: the system's temporary
 * directory unless a test needs it elsewhere (sandboxes never see /tmp, so
 * a data directory there is hidden whether or not its own mask works).
 */
export async function testRuntime(opts: Partial<RuncRuntimeOptions> = {}, under = tmpdir()): Promise<TestRuntime> {
  const dataDir = mkdtempSync(join(under, 'paddock-rt-'));
  const runtime = new RuncRuntime({ dataDir, ...sharedImages, ...opts });
  await runtime.prepare();
  const t: TestRuntime = {
    runtime,
    dataDir,
    // The runtime a test put in its place (one started again on the same data directory) is the one torn down.
    async teardown() {
      await t.runtime.removeEverything();
      expect(await t.runtime.leftovers()).toEqual([]);
      expect(parentCgroupsOnHost(t.runtime)).toEqual([]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

/**
 * What the runtime leaves of its sandboxes: not its parent cgroup, nor its
 * network's standing parts (table, service interface, pooled slots, claims),
 * nor its spare disks (their mounts, loop devices and directories).
 * A sandbox's own slot leaves its slot record behind with the rest.
 */
export const sandboxLeftovers = async (rt: RuncRuntime) =>
  (await rt.leftovers()).filter((l) => !l.endsWith(rt.cgroupParent) && !/^(network namespace|interface|nftables table|claim) /.test(l) && !/(^directory |\/)spare-disks\//.test(l));

/**
 * The runtime's parent cgroup wherever it exists on the host, found by
 * looking at every hierarchy mounted under /sys/fs/cgroup (and the root
 * itself, for a cgroup v2 host) rather than asking the runtime.
 */
export function parentCgroupsOnHost(runtime: RuncRuntime): string[] {
  const root = '/sys/fs/cgroup';
  return [root, ...readdirSync(root).map((d) => join(root, d))].map((d) => join(d, runtime.cgroupParent)).filter((d) => existsSync(d));
}

export function clients(runtime: RuncRuntime, id: string, user?: string): { fs: Client<typeof Filesystem>; proc: Client<typeof Process> } {
  const endpoint = runtime.envdEndpoint(id);
  if (!('socketPath' in endpoint)) throw new Error('expected a unix socket endpoint');
  const transport = createConnectTransport({
    baseUrl: 'http://sandbox',
    httpVersion: '1.1',
    nodeOptions: { socketPath: endpoint.socketPath },
    interceptors: [
      (next) => (req) => {
        req.header.set('x-access-token', TOKEN);
        if (user) req.header.set('authorization', `Basic ${Buffer.from(`${user}:`).toString('base64')}`);
        return next(req);
      },
    ],
  });
  return { fs: createClient(Filesystem, transport), proc: createClient(Process, transport) };
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  status: string;
}

/** Runs `bash -l -c script` in the sandbox and waits for it. */
export async function exec(runtime: RuncRuntime, id: string, script: string, opts: { user?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
  const { proc } = clients(runtime, id, opts.user);
  const out = { stdout: [] as Uint8Array[], stderr: [] as Uint8Array[] };
  let exitCode = NaN;
  let status = '';
  for await (const res of proc.start({ process: { cmd: '/bin/bash', args: ['-l', '-c', script] }, stdin: false }, { timeoutMs: opts.timeoutMs ?? 60_000 })) {
    const ev = res.event?.event;
    if (ev?.case === 'data' && (ev.value.output.case === 'stdout' || ev.value.output.case === 'stderr')) out[ev.value.output.case].push(ev.value.output.value);
    if (ev?.case === 'end') {
      exitCode = ev.value.exitCode;
      status = ev.value.status;
    }
  }
  return { stdout: Buffer.concat(out.stdout).toString(), stderr: Buffer.concat(out.stderr).toString(), exitCode, status };
}

/** Starts `bash -c script` in the sandbox and returns without waiting for it. */
export async function spawnDetached(runtime: RuncRuntime, id: string, script: string): Promise<number> {
  const { proc } = clients(runtime, id);
  const abort = new AbortController();
  const it = proc.start({ process: { cmd: '/bin/bash', args: ['-c', script] }, stdin: false }, { signal: abort.signal })[Symbol.asyncIterator]();
  const first = await it.next();
  abort.abort();
  const ev = first.value?.event?.event;
  if (ev?.case !== 'start') throw new Error('expected a start event');
  return ev.value.pid;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
