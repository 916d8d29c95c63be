// The local baselines, run in a small process of their own that does
// nothing else. Measured in the suite's process, a baseline paid for what the
// suite had done there before it. Measured: alternating with envd's 256 MiB
// of stdout read by a Connect client in the same process, the local pipe of
// `head -c 256M` read 730-1200 MiB/s (median about 900); with the same
// alternation but the pipe read in a process of its own, 1060-1580 MiB/s.
// A full GC before each run, or a pause, did not help; where exactly the
// cost comes from (forking a bigger process is one known part) is not pinned
// down. Paddock's own processes (envd, the server) are small, so a small
// process is also the fair comparison.
//
// Each call is timed in the baseline process and resolves with
// `{ elapsedMs, bytes }`: the time the work took there, without the round
// trip over IPC. lib.mjs's timing functions take that time instead of theirs.
// The watch latency, whose samples are each a write and its event, comes
// back already summarized, as timeit gives it.
//
//   const base = await startBaselineProcess();
//   await timePair(subject, () => base.spawn('/bin/true', [], { user }), ...);
//   await base.close();
import { fork, spawn } from 'node:child_process';
import { createReadStream, createWriteStream, lstatSync, mkdirSync, readdirSync, rmSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from './child-calls.mjs';
import { benchNodeFlags, loopbackTcp, timedHere, timeit } from './lib.mjs';

const self = fileURLToPath(import.meta.url);

/** Starts the baseline process; resolves once it is ready. */
export async function startBaselineProcess() {
  // The suite's own node options (see benchNodeFlags), not those of whoever started it.
  const child = fork(self, ['--baselines'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: benchNodeFlags });
  const { call, closed } = await callsTo(child, 'baseline process');
  return {
    /**
     * Runs `cmd` to its end, as `user` ({ uid, gid, home }) when given, with
     * stdout piped back and counted; fails if it exits non-zero or writes to stderr.
     */
    spawn: (cmd, args, { user } = {}) => call('spawn', { cmd, args, user }),
    /** `size` bytes over loopback TCP (see lib.mjs). */
    loopbackTcp: (size) => call('loopbackTcp', { size }),
    /**
     * Copies a file with a read stream piped into a write stream, to `dst`
     * (which must not exist), and removes the copy once timed: it leaves no
     * dirty pages behind for the kernel to write back while what runs next is
     * measured.
     */
    copyFile: (src, dst) => call('copyFile', { src, dst }),
    /** readdir of `dir`, sorted, and lstat of each entry. */
    listDir: (dir) => call('listDir', { dir }),
    /** Write → fs.watch event latency in `dir`, summarized like timeit's: `warmup` runs unmeasured, then `iterations`. */
    watchLatency: (dir, warmup, iterations) => call('watchLatency', { dir, warmup, iterations }),
    async close() {
      await call('close');
      await closed;
    },
  };
}

function runToEnd({ cmd, args, user }) {
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
    child.stdout.on('data', (b) => (bytes += b.length));
    child.stderr.on('data', (b) => (stderr += b));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      // A baseline that complains did not do the work it stands for (a shell that could not read its profile).
      if (code === 0 && stderr === '') resolve(bytes);
      else reject(new Error(`${cmd} ${args.join(' ')} ended with ${signal ?? `code ${code}`}: ${stderr.trim()}`));
    });
  });
}

async function watchLatency({ dir, warmup, iterations }) {
  mkdirSync(dir, { recursive: true });
  let waiting;
  const watcher = watch(dir, (_type, name) => {
    if (waiting && name === waiting.name) waiting.resolve();
  });
  try {
    return await timeit(async (i) => {
      const name = `f${i}-${Math.random()}`;
      const seen = new Promise((resolve) => (waiting = { name, resolve }));
      writeFileSync(join(dir, name), 'x');
      await seen;
    }, { warmup, iterations });
  } finally {
    watcher.close();
  }
}

if (process.argv[1] === self && process.argv[2] === '--baselines') {
  answerCalls(
    {
      spawn: (a) => timedHere(() => runToEnd(a)),
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
      watchLatency,
    },
    null,
  );
}
