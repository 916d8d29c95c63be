// The service in a process of its own, as `paddock start` runs it and with
// the same node options, so that a benchmark's client (the SDK, fetch) and
// the server do not share one thread, as they never do for users. Two calls
// cover what the HTTP API does not offer: waiting for the warm pool to fill,
// and removing every sandbox and runtime directory at the end (which also
// happens should the bench die).
//
//   const server = await startServerProcess({ home, warmPoolSize: 2, initialApiKey });
//   server.apiUrl, server.proxyUrl, await server.poolReady(), await server.close()
//
// With PADDOCK_BENCH_SERVER_PROF=DIR in the environment, the server writes a
// V8 CPU profile (`--cpu-prof`) into DIR when it closes: for probes, which
// time one thing and want to know where the server spent it.
import { serverNodeFlags } from '@paddock/server';
import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from './child-calls.mjs';
import { exitCodeOf, removeUnmounted, STOP_SIGNALS, undoOnInterrupt } from './interrupt.mjs';

const self = fileURLToPath(import.meta.url);

/** Starts the server in a child process; resolves once it listens. */
export async function startServerProcess(options) {
  const child = fork(self, ['--serve', JSON.stringify({ apiPort: 0, proxyPort: 0, ...options })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // The options `paddock start` runs with; not this process's own.
    execArgv: [...serverNodeFlags, ...profiling()],
  });
  const { ready, call, close } = await callsTo(child, 'server process');
  return {
    ...ready,
    pid: child.pid,
    poolReady: () => call('poolReady'),
    /** Stops the server and removes its sandboxes, and waits for its process to end. */
    close,
  };
}

/**
 * startServerProcess in a fresh temporary home (`prefix`); resolves with the
 * server, its home and `close`, which stops it and removes the home unless
 * something is still mounted below it. Also when the run is interrupted,
 * even while the server starts (see interrupt.mjs).
 */
export async function serverInHome(prefix, options) {
  const home = mkdtempSync(join(tmpdir(), prefix));
  const starting = startServerProcess({ ...options, home });
  const close = undoOnInterrupt(async () => {
    // A server that did not start has exited, and removed what it made.
    const server = await starting.catch(() => null);
    try {
      await server?.close();
    } finally {
      await removeUnmounted(home);
    }
  });
  try {
    return { server: await starting, home, close };
  } catch (err) {
    await close();
    throw err;
  }
}

function profiling() {
  const dir = process.env.PADDOCK_BENCH_SERVER_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** The host path of a sandbox's envd socket under the server's `home`: what the proxy connects to. */
export function envdSocket(home, sandboxId) {
  return join(home, 'runtime', 'sandboxes', sandboxId, 'sock', 'envd.sock');
}

/** The host pid of a sandbox's envd, the container's init, from runc's state under the server's `home`. */
export function envdPid(home, sandboxId) {
  return JSON.parse(execFileSync('runc', ['--root', join(home, 'runtime', 'runc'), 'state', sandboxId]).toString()).pid;
}

async function serve(options) {
  const { startServer } = await import('@paddock/server');
  // A signal while the server starts (the runtime mounts as it prepares) is
  // held until it has started, and then closes it as answerCalls would.
  let signalled = null;
  const hold = (signal) => (signalled ??= signal);
  for (const signal of STOP_SIGNALS) process.on(signal, hold);
  const server = await startServer(options);
  for (const signal of STOP_SIGNALS) process.off(signal, hold);
  // The sandboxes go even when the server's own close fails: a Ctrl-C also
  // reaches the runc commands it is running, and their creates fail.
  const close = async () => {
    try {
      await server.close();
    } finally {
      await server.runtime.removeEverything();
    }
  };
  if (signalled) {
    await close().catch((err) => process.stderr.write(`[bench] server process: ${err.message}\n`));
    process.exit(exitCodeOf(signalled));
  }
  answerCalls(
    {
      poolReady: () => server.runtime.poolReady(),
      close,
    },
    { apiUrl: server.apiUrl, proxyUrl: server.proxyUrl },
  );
}

if (process.argv[1] === self && process.argv[2] === '--serve') await serve(JSON.parse(process.argv[3]));
