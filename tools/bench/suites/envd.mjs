// envd alone (`--layers`), the built daemon as a real process on the host,
// against what the same work costs without it: a local spawn, a local pipe,
// loopback TCP, direct fs calls. Driven with the clients @paddock/sdk uses.
import { createClient } from '@connectrpc/connect';
import { EnvdClient, createNodeTransport } from '@paddock/envd-client';
import { Filesystem, Process } from '@paddock/models';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startLocalEnvd } from '../../testing/local-envd.mjs';
import { undoOnInterrupt } from '../interrupt.mjs';
import { closings, eventWaiter, MiB, pair, row, settleDisk } from '../lib.mjs';
import { startBaselines } from '../processes.mjs';

/** Runs a command through envd; resolves with its stdout byte count once it ended. */
async function runViaEnvd(proc, cmd, args) {
  let bytes = 0;
  for await (const res of proc.start({ process: { cmd, args }, stdin: false })) {
    const ev = res.event?.event;
    if (ev?.case === 'data' && ev.value.output.case === 'stdout') bytes += ev.value.output.value.length;
  }
  return bytes;
}

export async function envdSuite({ quick, log }) {
  const rows = [];
  const closing = closings();
  try {
    const base = await startBaselines();
    closing.add(base.close);
    const envd = await startLocalEnvd({ prefix: 'bench-envd-' });
    closing.add(undoOnInterrupt(() => envd.stop()));
    const transport = createNodeTransport({ baseUrl: envd.url, useBinaryFormat: true });
    const [fs, proc, files] = [createClient(Filesystem, transport), createClient(Process, transport), new EnvdClient({ envdUrl: envd.url })];
    const user = { uid: 1000, gid: 1000, home: envd.home.user };
    const size = quick ? 64 : 256;
    const large = { warmup: 1, iterations: quick ? 2 : 21, rate: true };
    const add = (name, unit, [value, ...baselines], baselineNames, target) =>
      baselines.forEach((baseline, i) => rows.push(row({ suite: 'envd', name, unit, value, baseline, baselineName: baselineNames[i], target: i ? undefined : target })));

    log('envd: exec round trip');
    for (const [cmd, args, target] of [['/bin/bash', ['-l', '-c', 'true'], { on: 'ratio', op: '<=', value: 1.5 }], ['/bin/true', []]]) {
      const timed = await pair([() => runViaEnvd(proc, cmd, args), () => base.spawn(cmd, args, user)], { warmup: 5, iterations: quick ? 15 : 100 });
      add(`exec \`${[cmd, ...args].join(' ').replace('/bin/bash', 'bash')}\` round trip`, 'ms', timed, ['local spawn of the same'], target);
    }

    log('envd: stdout throughput');
    const head = ['/usr/bin/head', ['-c', `${size}M`, '/dev/zero']];
    add(`stdout throughput (head -c ${size}M)`, 'MiB/s', await pair([() => runViaEnvd(proc, ...head), () => base.pipe(...head, user)], large), ['local pipe'], { on: 'ratio', op: '>=', value: 0.25 });

    log('envd: file transfer');
    const src = join(envd.dir, 'payload.bin');
    const payload = randomBytes(size * MiB);
    writeFileSync(src, payload);
    const tcp = () => base.loopbackTcp(size * MiB);
    const half = { on: 'ratio', op: '>=', value: 0.5 };
    settleDisk();
    const upload = async () => (await files.upload('upload.bin', payload, { encoding: 'octet-stream' }), size * MiB);
    add(`upload ${size} MiB (POST /files)`, 'MiB/s', await pair([upload, tcp], large), ['loopback TCP in Node'], half);
    settleDisk();
    const download = async () => {
      let bytes = 0;
      for await (const c of await files.download('upload.bin', { format: 'node-stream' })) bytes += c.length;
      if (bytes !== size * MiB) throw new Error(`download returned ${bytes} bytes`);
      return bytes;
    };
    const copy = { fn: () => base.copyFile(src, join(envd.dir, 'copy.bin')), every: 3 };
    add(`download ${size} MiB (GET /files)`, 'MiB/s', await pair([download, tcp, copy], large), ['loopback TCP in Node', 'fs stream copy'], half);
    settleDisk();

    log('envd: ListDir of 10 000 entries');
    const many = join(envd.dir, 'many');
    mkdirSync(many);
    for (let i = 0; i < 10_000; i++) writeFileSync(join(many, `f${String(i).padStart(5, '0')}`), '');
    const list = async () => {
      const { entries } = await fs.listDir({ path: many, depth: 1 });
      if (entries.length !== 10_000) throw new Error(`ListDir returned ${entries.length}`);
    };
    add('ListDir of 10 000 entries', 'ms', await pair([list, () => base.listDir(many)], { warmup: 2, iterations: quick ? 5 : 15 }), ['readdir + lstat each, in process']);

    log('envd: watch event latency');
    const watched = join(envd.dir, 'watched');
    mkdirSync(watched);
    const local = await base.localWatch(join(envd.dir, 'watched-local'));
    closing.add(local.close);
    const envdWatch = await watchEvents(fs, watched);
    closing.add(envdWatch.close);
    // The file is written here in both; only where the event comes from differs.
    const localWrite = (name) => writeFileSync(join(envd.dir, 'watched-local', name), 'x');
    const latency = await pair([envdWatch.sample, () => local.sample(localWrite)], { warmup: 3, iterations: quick ? 30 : 150 });
    add('watch latency (write → event)', 'ms', latency, ['the same with a local HTTP service (fs.watch, streamed event)']);
  } finally {
    await closing.run();
  }
  return rows;
}

/** envd's WatchDir on `dir`, kept open: `sample()` writes a new file there and resolves once envd streamed its event. */
async function watchEvents(fs, dir) {
  const abort = new AbortController();
  const events = fs.watchDir({ path: dir }, { signal: abort.signal })[Symbol.asyncIterator]();
  await events.next(); // the stream's start
  const waiter = eventWaiter();
  const pump = (async () => {
    for (let r; !(r = await events.next()).done; ) if (r.value.event.case === 'filesystem') waiter.saw(r.value.event.value.name);
  })().then(() => waiter.end(new Error('the watch ended')), waiter.end);
  let written = 0;
  return {
    async sample() {
      const name = `f${written++}`;
      const seen = waiter.expect(name);
      writeFileSync(join(dir, name), 'x');
      await seen;
    },
    async close() {
      abort.abort();
      await pump;
    },
  };
}
