// The bench's helper processes, each forked from this file with a role and
// called over its IPC channel:
// - `server`: the whole service, with the node options `paddock start` uses,
//   so that a benchmark's client and the server never share a thread.
// - `paddock`, `e2b`: one SDK running the comparison workload, each in a
//   process of its own as in a user's program.
// - `spawner`, `mover`: the local baselines. A fork costs more the more memory
//   its parent has mapped, so the commands whose run is the baseline start
//   from a process that does nothing else, and whatever moves data (pipes,
//   loopback TCP, fs copies, the watch service) runs in the other.
import { fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, watch, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { exitCodeOf, removeUnmounted, STOP_SIGNALS, undoOnInterrupt } from './interrupt.mjs';
import { benchNodeFlags, eventWaiter, loopbackTcp, MiB, timedHere } from './lib.mjs';

const self = fileURLToPath(import.meta.url);

/** Starts helper `role` with `arg`; resolves once it is ready with `{ value, call(op, arg), close() }`. */
async function startHelper(role, arg, { execArgv = benchNodeFlags, env } = {}) {
  const child = fork(self, ['--helper', role, JSON.stringify(arg ?? null)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv, env });
  const pending = new Map();
  let nextId = 1;
  let gone = null;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const value = await new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m.ready) return resolve(m.value);
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p?.reject(new Error(`${role}: ${m.error}`));
      else p?.resolve(m.value);
    });
    child.on('error', reject);
    child.once('exit', (code, signal) => {
      gone = Object.assign(new Error(`${role} helper exited (${signal ?? code})`), { gone: true });
      reject(gone);
      for (const p of pending.values()) p.reject(gone);
      pending.clear();
    });
  });
  const call = (op, a) =>
    new Promise((resolve, reject) => {
      if (gone || !child.connected) return reject(gone ?? Object.assign(new Error(`${role} helper has gone`), { gone: true }));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, op, arg: a }, (err) => err && pending.delete(id) && reject(Object.assign(err, { gone: true })));
    });
  return {
    value,
    call,
    /** Closes the helper and waits for it to exit; one that a signal already ended is no failure. */
    async close() {
      await call('close').catch((err) => {
        if (!err.gone) throw err;
      });
      await exited;
    },
  };
}

/** The service on a fresh temporary home (or a given one, kept); `close` stops it and removes a temporary home, also on interruption. */
export async function serverInHome(prefix, options, { home: kept } = {}) {
  // Loaded here, not at the top: the baseline processes, forked from this file, stay small.
  const { serverNodeFlags } = await import('@paddock/server');
  // A given data directory is kept (what was built there serves the next run); a new one is removed.
  const home = kept ?? mkdtempSync(join(tmpdir(), prefix));
  const starting = startHelper('server', { apiPort: 0, proxyPort: 0, ...options, home }, { execArgv: serverNodeFlags });
  const close = undoOnInterrupt(async () => {
    const server = await starting.catch(() => null);
    try {
      await server?.close();
    } finally {
      if (!kept) await removeUnmounted(home);
    }
  });
  const server = await starting.catch(async (err) => {
    await close();
    throw err;
  });
  return { ...server.value, home, poolReady: () => server.call('poolReady'), close };
}

/** One SDK ('paddock' or 'e2b') in a process of its own; `run()` resolves with one workload's ms. */
export async function startWorkload(sdk, opts) {
  const env = { ...process.env, E2B_API_URL: opts.apiUrl, E2B_SANDBOX_URL: opts.sandboxUrl, E2B_API_KEY: opts.apiKey };
  const h = await startHelper(sdk, opts, { env });
  return { run: () => h.call('run'), close: h.close };
}

/** The two baseline processes; every call resolves with `{ ms, bytes }`, timed over there. */
export async function startBaselines() {
  const started = await Promise.allSettled([startHelper('spawner'), startHelper('mover')]);
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    await Promise.all(started.filter((s) => s.status === 'fulfilled').map((s) => s.value.close()));
    throw failed.reason;
  }
  const [spawner, mover] = started.map((s) => s.value);
  return {
    /** Runs a command to its end as `user` ({ uid, gid, home }); fails on a non-zero exit, stderr, or stdout beyond 64 KiB. */
    spawn: (cmd, args, user) => spawner.call('run', { cmd, args, user, limit: 64 * 1024 }),
    /** The same, with stdout piped back and counted however much it is. */
    pipe: (cmd, args, user) => mover.call('run', { cmd, args, user, limit: null }),
    loopbackTcp: (size) => mover.call('loopbackTcp', size),
    /** A read stream piped into a write stream to `dst`, removed once timed so that its writeback weighs on nothing after. */
    copyFile: (src, dst) => mover.call('copyFile', { src, dst }),
    /** readdir of `dir` and lstat of each entry. */
    listDir: (dir) => mover.call('listDir', dir),
    /**
     * What the watch row does (write a file over HTTP, wait for its event on a
     * streamed watch), against a small HTTP service in the mover that writes
     * into `dir` and watches it with fs.watch: `sample(write?)` and `close()`.
     */
    async localWatch(dir) {
      const url = `http://127.0.0.1:${await mover.call('serveWatch', dir)}`;
      const abort = new AbortController();
      const res = await fetch(`${url}/watch`, { signal: abort.signal });
      const events = eventWaiter();
      const reading = (async () => {
        for await (const line of createInterface({ input: Readable.fromWeb(res.body) })) events.saw(line);
      })()
        .then(() => new Error('the local watch stream ended'), (err) => err)
        .then(events.end);
      let written = 0;
      return {
        async sample(write) {
          const name = `l${written++}`;
          // The write's `change`, after its creation's `rename`.
          await Promise.all([write ? write(name) : fetch(`${url}/files/${name}`, { method: 'PUT', body: 'x' }).then((r) => r.arrayBuffer()), events.expect(`change ${name}`)]);
        },
        async close() {
          abort.abort();
          await reading;
          await mover.call('stopWatch');
        },
      };
    },
    close: () => Promise.all([spawner.close(), mover.close()]),
  };
}

/** Runs a command to its end; resolves with the bytes it wrote to stdout. */
function runToEnd({ cmd, args, user, limit }) {
  return new Promise((resolve, reject) => {
    const env = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: user?.home, USER: 'user', LOGNAME: 'user' };
    const child = spawn(cmd, args, user ? { uid: user.uid, gid: user.gid, cwd: user.home, env } : {});
    let bytes = 0;
    let stderr = '';
    child.stdout.on('data', (b) => {
      bytes += b.length;
      if (limit !== null && bytes > limit) child.kill();
    });
    child.stderr.on('data', (b) => (stderr += b));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      // A baseline that complains (a shell that could not read its profile) did not do the work it stands for.
      if (limit !== null && bytes > limit) reject(new Error(`${cmd} wrote more than ${limit} bytes: a command that moves data is a pipe`));
      else if (code === 0 && stderr === '') resolve(bytes);
      else reject(new Error(`${cmd} ${args.join(' ')} ended with ${signal ?? `code ${code}`}: ${stderr.trim()}`));
    });
  });
}

let watchService = null;

/** `PUT /files/NAME` writes into `dir`; `GET /watch` streams each fs.watch event in it as a line `TYPE NAME`. */
async function serveWatch(dir) {
  mkdirSync(dir, { recursive: true });
  const streams = new Set();
  const watcher = watch(dir, (type, name) => streams.forEach((res) => res.write(`${type} ${name}\n`)));
  const server = createServer((req, res) => {
    if (req.url === '/watch') {
      res.writeHead(200).flushHeaders();
      streams.add(res);
      return void res.once('close', () => streams.delete(res));
    }
    const name = /^\/files\/([\w.-]+)$/.exec(req.url)?.[1];
    if (req.method !== 'PUT' || !name) return void res.writeHead(400).end(`expected PUT /files/NAME or GET /watch, got ${req.method} ${req.url}`);
    const chunks = [];
    req.on('data', (c) => chunks.push(c)).on('end', () => {
      writeFileSync(join(dir, name), Buffer.concat(chunks));
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  watchService = { server, watcher };
  return server.address().port;
}

async function stopWatch() {
  watchService?.watcher.close();
  watchService?.server.closeAllConnections();
  await new Promise((resolve) => (watchService ? watchService.server.close(resolve) : resolve()));
  watchService = null;
}

const roles = {
  async server(options) {
    // A bench measures the server, not its terminal: only warnings and errors are logged (to the bench's output).
    const server = await (await import('@paddock/server')).startServer({ logLevel: 'warn', ...options });
    return {
      value: { apiUrl: server.apiUrl, proxyUrl: server.proxyUrl },
      poolReady: () => server.runtime.poolReady(),
      // The sandboxes go even when the server's own close fails (a Ctrl-C also reaches its runc commands).
      close: () => server.close().finally(() => server.runtime.removeEverything()),
    };
  },
  paddock: async (opts) => workload(await import('@paddock/sdk'), opts),
  // The e2b SDK reads its addresses and key from the environment (startWorkload).
  e2b: async () => workload(await import('e2b')),
  spawner: () => ({ run: (a) => timedHere(() => runToEnd(a)) }),
  mover: () => ({
    run: (a) => timedHere(() => runToEnd(a)),
    loopbackTcp: (size) => timedHere(() => loopbackTcp(size)),
    copyFile: ({ src, dst }) =>
      timedHere(() => pipeline(createReadStream(src), createWriteStream(dst, { flags: 'wx' })).then(() => lstatSync(dst).size)).finally(() => rmSync(dst, { force: true })),
    listDir: (dir) => timedHere(async () => readdirSync(dir).sort().map((name) => lstatSync(join(dir, name))).length),
    serveWatch,
    stopWatch,
  }),
};

/** Create a sandbox, write and read back 1 MiB, run `echo`, kill. */
function workload({ Sandbox }, opts) {
  const payload = randomBytes(MiB);
  return {
    async run() {
      const t = performance.now();
      const sbx = await Sandbox.create(opts);
      await sbx.files.write('payload.bin', payload);
      const back = await sbx.files.read('payload.bin', { format: 'bytes' });
      if (back.length !== MiB) throw new Error(`read back ${back.length} bytes of ${MiB}`);
      await sbx.commands.run('echo hi');
      await sbx.kill();
      return performance.now() - t;
    },
  };
}

/**
 * The helper's side: answers calls with its role's operations. `close` runs
 * once, also when a signal comes (a Ctrl-C reaches every process of the run)
 * or the parent goes; a signal during the start waits for it, then closes.
 */
async function helper(role, arg) {
  const starting = Promise.resolve().then(() => roles[role](arg));
  let closing = null;
  const close = () => (closing ??= starting.then((ops) => ops.close?.()));
  const closeAndExit = (code) =>
    void close()
      .catch((err) => process.stderr.write(`[bench] ${role}: ${err.message}\n`))
      .finally(() => process.exit(code));
  for (const signal of STOP_SIGNALS) process.on(signal, () => closeAndExit(exitCodeOf(signal)));
  process.once('disconnect', () => closeAndExit(0));
  const reply = (message, then) => (process.connected ? process.send(message, then) : then?.());
  const ops = await starting;
  process.on('message', async ({ id, op, arg: a }) => {
    try {
      if (op !== 'close' && typeof ops[op] !== 'function') throw new Error(`unknown operation '${op}'`);
      const value = await (op === 'close' ? close() : ops[op](a));
      reply({ id, value }, () => op === 'close' && process.exit(0));
    } catch (err) {
      reply({ id, error: err.message });
    }
  });
  reply({ ready: true, value: ops.value ?? null });
}

if (process.argv[1] === self && process.argv[2] === '--helper') await helper(process.argv[3], JSON.parse(process.argv[4]));
