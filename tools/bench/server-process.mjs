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
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from './child-calls.mjs';

const self = fileURLToPath(import.meta.url);

/** Starts the server in a child process; resolves once it listens. */
export async function startServerProcess(options) {
  const child = fork(self, ['--serve', JSON.stringify({ apiPort: 0, proxyPort: 0, ...options })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // The options `paddock start` runs with; not this process's own.
    execArgv: [...serverNodeFlags, ...profiling()],
  });
  const { ready, call, closed } = await callsTo(child, 'server process');
  return {
    ...ready,
    pid: child.pid,
    poolReady: () => call('poolReady'),
    async close() {
      await call('close');
      await closed;
    },
  };
}

function profiling() {
  const dir = process.env.PADDOCK_BENCH_SERVER_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** The host path of a sandbox's envd socket under the server's `home`: what the proxy connects to. */
export function envdSocket(home, sandboxId) {
  return join(home, 'runtime', 'sandboxes', sandboxId, 'run', 'envd.sock');
}

/** The host pid of a sandbox's envd, the container's init, from runc's state under the server's `home`. */
export function envdPid(home, sandboxId) {
  return JSON.parse(execFileSync('runc', ['--root', join(home, 'runtime', 'runc'), 'state', sandboxId]).toString()).pid;
}

async function serve(options) {
  const { startServer } = await import('@paddock/server');
  const server = await startServer(options);
  answerCalls(
    {
      poolReady: () => server.runtime.poolReady(),
      async close() {
        await server.close();
        await server.runtime.removeEverything();
      },
    },
    { apiUrl: server.apiUrl, proxyUrl: server.proxyUrl },
  );
}

if (process.argv[1] === self && process.argv[2] === '--serve') await serve(JSON.parse(process.argv[3]));
