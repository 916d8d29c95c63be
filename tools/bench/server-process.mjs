// The service in a process of its own, as `paddock start` runs it and with
// the same node options, so that a benchmark's client (the SDK, fetch) and
// the server do not share one thread, as they never do for users. The
// parent talks to the child over the IPC channel of fork() for the two
// things the HTTP API does not offer: waiting for the warm pool to fill,
// and removing every sandbox and runtime directory at the end.
//
//   const server = await startServerProcess({ home, warmPoolSize: 2, initialApiKey });
//   server.apiUrl, server.proxyUrl, await server.poolReady(), await server.close()
import { serverNodeFlags } from '@paddock/server';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);

/** Starts the server in a child process; resolves once it listens. */
export async function startServerProcess(options) {
  const child = fork(self, ['--serve', JSON.stringify({ apiPort: 0, proxyPort: 0, ...options })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // The options `paddock start` runs with; not this process's own.
    execArgv: [...serverNodeFlags],
  });
  const pending = new Map();
  let nextId = 1;
  let exited = null;
  const ready = new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m.ready) return resolve(m);
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(new Error(`server process: ${m.error}`));
      else p.resolve();
    });
    child.once('exit', (code, signal) => {
      exited = `server process exited (${signal ?? code})`;
      reject(new Error(exited));
      for (const p of pending.values()) p.reject(new Error(exited));
      pending.clear();
    });
  });
  const call = (op) =>
    new Promise((resolve, reject) => {
      if (exited) return reject(new Error(exited));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, op });
    });
  const { apiUrl, proxyUrl } = await ready;
  return {
    apiUrl,
    proxyUrl,
    pid: child.pid,
    poolReady: () => call('poolReady'),
    async close() {
      const gone = new Promise((r) => (exited ? r() : child.once('exit', r)));
      await call('close');
      await gone;
    },
  };
}

async function serve(options) {
  const { startServer } = await import('@paddock/server');
  const server = await startServer(options);
  const ops = {
    poolReady: () => server.runtime.poolReady(),
    async close() {
      await server.close();
      await server.runtime.removeEverything();
    },
  };
  let closing = null;
  const close = () => (closing ??= ops.close());
  process.on('message', async ({ id, op }) => {
    try {
      if (!ops[op]) throw new Error(`unknown operation '${op}'`);
      await (op === 'close' ? close() : ops[op]());
      process.send({ id }, () => op === 'close' && process.exit(0));
    } catch (err) {
      process.send({ id, error: err.message });
    }
  });
  // The bench died or was stopped: leave no sandbox behind.
  process.once('disconnect', () => void close().finally(() => process.exit(0)));
  process.send({ ready: true, apiUrl: server.apiUrl, proxyUrl: server.proxyUrl });
}

if (process.argv[1] === self && process.argv[2] === '--serve') await serve(JSON.parse(process.argv[3]));
