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
    /** Write → fs.watch event latency in `dir`, summarized like timeit's: `warmup` runs unmeasured, then `iterations`. */
    watchLatency: (dir, warmup, iterations) => mover.call('watchLatency', { dir, warmup, iterations }),
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
    watchLatency,
  };
  answerCalls(process.argv[3] === 'spawn' ? spawnOnly : all, null);
}
