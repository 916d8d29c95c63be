// The local baselines, run in small processes of their own that do nothing
// else. Measured in the suite's process, a baseline paid for what the suite
// had done there before it. Measured: alternating with envd's 256 MiB of
// stdout read by a Connect client in the same process, the local pipe of
// `head -c 256M` read 730-1200 MiB/s (median about 900); with the same
// alternation but the pipe read in a process of its own, 1060-1580 MiB/s.
// A small process is also the fair floor: what this machine does at best.
// (Paddock's own are not that small: envd starts at about 53 MiB and the
// server at about 100, and their forks pay for that.)
//
// There are two of them. Node starts a child by forking, and a fork here
// costs more the more memory its parent has mapped: a spawn of `true` took
// 1.8 ms from a process of 45 MiB, 11.8 ms from one of 305 MiB and 30 ms from
// one of 1 GiB (probes/spawn-rss.mjs). The baselines that move data (loopback
// TCP, pipes, fs copies) grow a process: one grew from 51 to 93 MiB over three
// `head -c 256M` pipes, and its spawns of `true` went from 2.1 to 3.3 ms. In
// the sdk suite the bare spawns of `true` in the cold creates' last block,
// after the transfers, took 1.9 to 2.6 times what those of its first did.
// So the commands whose own run is the baseline (`spawn`) start from a
// process that does nothing but start them, and everything that moves data
// runs in the other.
//
// Each call is timed in the baseline process and resolves with
// `{ elapsedMs, bytes }`: the time the work took there, without the round
// trip over IPC. lib.mjs's timing functions take that time instead of theirs.
// The exception is the watch (`localWatch`): its baseline is a small HTTP
// service in the data process, and its samples are timed in the suite's
// process by a client of it, as the SDK's are.
//
//   const base = await startBaselineProcess();
//   await timePair(subject, () => base.spawn('/bin/true', [], { user }), ...);
//   await base.close();
import { fork, spawn } from 'node:child_process';
import { createReadStream, createWriteStream, lstatSync, mkdirSync, readdirSync, rmSync, watch, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from './child-calls.mjs';
import { benchNodeFlags, loopbackTcp, timedHere } from './lib.mjs';

const self = fileURLToPath(import.meta.url);

/**
 * Most a command run with `spawn` may write to stdout: one that writes more
 * is moving data, and belongs to `pipe`.
 */
const SPAWN_OUTPUT_LIMIT = 64 * 1024;

/** Starts the baseline processes (see above); resolves once they are ready. */
export async function startBaselineProcess() {
  // The suite's own node options (see benchNodeFlags), not those of whoever started it.
  const start = (role, name) => callsTo(fork(self, ['--baselines', role], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: benchNodeFlags }), name);
  const started = await Promise.allSettled([start('spawn', 'baseline spawner'), start('move', 'baseline process')]);
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    // The one that did start goes too.
    await Promise.all(started.filter((s) => s.status === 'fulfilled').map((s) => s.value.close()));
    throw failed.reason;
  }
  const [spawner, mover] = started.map((s) => s.value);
  return {
    /**
     * Runs `cmd` to its end, as `user` ({ uid, gid, home }) when given, from
     * the process that only starts commands; fails if it exits non-zero, writes
     * to stderr or writes more than SPAWN_OUTPUT_LIMIT to stdout.
     */
    spawn: (cmd, args, { user } = {}) => spawner.call('spawn', { cmd, args, user, limit: SPAWN_OUTPUT_LIMIT }),
    /** Like spawn, with stdout piped back and counted however much it is (a throughput baseline). */
    pipe: (cmd, args, { user } = {}) => mover.call('spawn', { cmd, args, user, limit: null }),
    /** `size` bytes over loopback TCP (see lib.mjs). */
    loopbackTcp: (size) => mover.call('loopbackTcp', { size }),
    /**
     * Copies a file with a read stream piped into a write stream, to `dst`
     * (which must not exist), and removes the copy once timed: it leaves no
     * dirty pages behind for the kernel to write back while what runs next is
     * measured.
     */
    copyFile: (src, dst) => mover.call('copyFile', { src, dst }),
    /** readdir of `dir`, sorted, and lstat of each entry. */
    listDir: (dir) => mover.call('listDir', { dir }),
    /**
     * The watch's baseline: what a sample of the watch row does (write a
     * file over HTTP, wait for its event on a stream that watches the
     * directory), against a small HTTP service in the data process that
     * writes into `dir` and watches it with fs.watch, instead of through the
     * proxy, envd and a sandbox. Resolves with `sample(write?)`, one write
     * and its event, to be timed by the caller, and `close()`.
     */
    localWatch: async (dir) => {
      const { port } = await mover.call('serveWatch', { dir });
      return watchClient(`http://127.0.0.1:${port}`, () => mover.call('stopWatch'));
    },
    async close() {
      await Promise.all([spawner.close(), mover.close()]);
    },
  };
}

/** Runs a command to its end; resolves with the bytes it wrote to stdout. `limit` (null for none) caps them. */
function runToEnd({ cmd, args, user, limit }) {
  return new Promise((resolve, reject) => {
    const options = { stdio: ['ignore', 'pipe', 'pipe'] };
    if (user) {
      Object.assign(options, {
        uid: user.uid,
        gid: user.gid,
        cwd: user.home,
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: user.home, USER: 'user', LOGNAME: 'user' },
      });
    }
    const child = spawn(cmd, args, options);
    let bytes = 0;
    let stderr = '';
    child.stdout.on('data', (b) => {
      bytes += b.length;
      if (limit !== null && bytes > limit) child.kill();
    });
    child.stderr.on('data', (b) => (stderr += b));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      // A baseline that complains did not do the work it stands for (a shell that could not read its profile).
      if (limit !== null && bytes > limit) reject(new Error(`${cmd} ${args.join(' ')} wrote more than ${limit} bytes: a command that moves data is run with pipe`));
      else if (code === 0 && stderr === '') resolve(bytes);
      else reject(new Error(`${cmd} ${args.join(' ')} ended with ${signal ?? `code ${code}`}: ${stderr.trim()}`));
    });
  });
}

/**
 * The service behind localWatch, in the data process: `PUT /files/NAME`
 * writes its body to `dir`/NAME, and `GET /watch` streams every fs.watch
 * event in `dir` as a line (`rename NAME`, `change NAME`) until the client
 * goes. One at a time.
 */
let watchServer = null;
async function serveWatch({ dir }) {
  if (watchServer) throw new Error('a watch service is already running');
  mkdirSync(dir, { recursive: true });
  const streams = new Set();
  const watcher = watch(dir, (type, name) => {
    for (const res of streams) res.write(`${type} ${name}\n`);
  });
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/watch') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.flushHeaders();
      streams.add(res);
      res.once('close', () => streams.delete(res));
      return;
    }
    const name = req.method === 'PUT' && req.url.startsWith('/files/') ? decodeURIComponent(req.url.slice('/files/'.length)) : '';
    if (!/^[\w.-]+$/.test(name)) {
      res.writeHead(400).end(`expected PUT /files/NAME or GET /watch, got ${req.method} ${req.url}`);
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      writeFileSync(join(dir, name), Buffer.concat(chunks));
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  watchServer = { server, watcher, streams };
  return { port: server.address().port };
}

async function stopWatch() {
  if (!watchServer) return;
  const { server, watcher, streams } = watchServer;
  watchServer = null;
  watcher.close();
  for (const res of streams) res.end();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(() => resolve()));
}

/**
 * A client of serveWatch at `url`, in the calling process: it keeps the
 * event stream open, and `sample()` writes a new file and resolves once the
 * event of its write came (`change`, after the `rename` of its creation), as
 * the watch row's subject waits for the `write` event through the SDK. `close`
 * (once, however often called) ends the stream, then calls `stop`, which
 * stops the service.
 */
async function watchClient(url, stop) {
  const abort = new AbortController();
  let waiting = null;
  let ended = null;
  const res = await fetch(`${url}/watch`, { signal: abort.signal });
  if (!res.ok || !res.body) throw new Error(`GET ${url}/watch: ${res.status}`);
  const reading = (async () => {
    let pending = '';
    for await (const text of res.body.pipeThrough(new TextDecoderStream())) {
      pending += text;
      for (let i; (i = pending.indexOf('\n')) >= 0; pending = pending.slice(i + 1)) {
        if (waiting && pending.slice(0, i) === `change ${waiting.name}`) waiting.resolve();
      }
    }
  })().then(
    () => (ended = new Error('the local watch stream ended')),
    (err) => (ended = abort.signal.aborted ? new Error('the local watch was closed') : err),
  ).then(() => waiting?.reject(ended));
  let written = 0;
  let closing = null;
  return {
    /** One write and its event; `write(name)`, when given, writes the file instead of a PUT to the service. */
    async sample(write) {
      const name = `l${written++}`;
      const seen = new Promise((resolve, reject) => (ended ? reject(ended) : (waiting = { name, resolve, reject })));
      const wrote = write
        ? write(name)
        : fetch(`${url}/files/${name}`, { method: 'PUT', body: 'x' }).then(async (put) => {
            if (put.status !== 204) throw new Error(`PUT ${url}/files/${name}: ${put.status} ${await put.text()}`);
          });
      // Both awaited together: a write that fails (the run stopped) leaves
      // no event promise that rejects later with no one to hear it.
      await Promise.all([wrote, seen]);
    },
    close: () =>
      (closing ??= (async () => {
        abort.abort();
        await reading;
        await stop();
      })()),
  };
}

if (process.argv[1] === self && process.argv[2] === '--baselines') {
  const spawnOnly = { spawn: (a) => timedHere(() => runToEnd(a)) };
  // The spawner answers nothing else, so nothing can grow it (see above).
  const all = {
    ...spawnOnly,
    loopbackTcp: ({ size }) => timedHere(() => loopbackTcp(size)),
    copyFile: async ({ src, dst }) => {
      try {
        return await timedHere(() => pipeline(createReadStream(src), createWriteStream(dst, { flags: 'wx' })).then(() => lstatSync(dst).size));
      } finally {
        rmSync(dst, { force: true });
      }
    },
    listDir: ({ dir }) =>
      timedHere(async () => {
        const names = readdirSync(dir).sort();
        for (const name of names) lstatSync(join(dir, name));
        return names.length;
      }),
    serveWatch,
    stopWatch,
  };
  answerCalls(process.argv[3] === 'spawn' ? spawnOnly : all, null);
}
