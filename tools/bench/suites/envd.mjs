// envd against what the same work costs without it: a local spawn, a local
// pipe, loopback TCP, direct fs calls. envd runs as a real process (the
// built dist/main.cjs) and is driven over HTTP/1.1 with the transport
// @paddock/sdk uses (createNodeTransport of @paddock/envd-client).
// connect-node's transport cost the client 1.8 ms of CPU per started
// command against 1.0 to 1.3 ms (see node-transport.ts), and on two cores
// a client's CPU is taken from envd, whom these rows are about.
import { createClient } from '@connectrpc/connect';
import { EnvdClient, createNodeTransport } from '@paddock/envd-client';
import { Filesystem, Process } from '@paddock/models';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startLocalEnvd } from '../../testing/local-envd.mjs';
import { startBaselineProcess } from '../baseline-process.mjs';
import { undoOnInterrupt } from '../interrupt.mjs';
import { row, settleDisk, throughputAlternated, throughputPair, timePair } from '../lib.mjs';

const MiB = 1024 * 1024;

/** The built envd on the host, with Connect clients for its two services. */
async function startEnvd() {
  const envd = await startLocalEnvd({ prefix: 'bench-envd-' });
  // Its process and directory go when the run is interrupted, too.
  const stop = undoOnInterrupt(() => envd.stop());
  const transport = createNodeTransport({ baseUrl: envd.url, useBinaryFormat: true });
  // Files go over the HTTP/1.1 client @paddock/sdk uses for them
  // (envd-client's http1.ts). Read with node:http, a 256 MiB download came
  // to 0.49 of loopback in one block of 15 and 0.73 in the next, on the same
  // envd: the client's own receive path, not envd, decided the row. Through
  // EnvdClient the two blocks read 1.60 and 1.56.
  const files = new EnvdClient({ envdUrl: envd.url });
  return { ...envd, stop, fs: createClient(Filesystem, transport), proc: createClient(Process, transport), files };
}

/** Runs a command through envd; resolves with the stdout byte count once it ended. */
async function runViaEnvd(envd, cmd, args) {
  let bytes = 0;
  for await (const res of envd.proc.start({ process: { cmd, args }, stdin: false })) {
    const ev = res.event?.event;
    if (ev?.case === 'data' && ev.value.output.case === 'stdout') bytes += ev.value.output.value.length;
  }
  return bytes;
}

export async function envdSuite({ quick, log }) {
  const rows = [];
  const base = await startBaselineProcess();
  const envd = await startEnvd();
  // Local commands run as envd runs them: as `user`, in its home.
  const user = { uid: 1000, gid: 1000, home: envd.home.user };
  const runLocally = (cmd, args) => base.spawn(cmd, args, { user });
  const iterations = quick ? 15 : 100;
  // 256 MiB streams: the sdk suite takes 31 (stdout) and 61 (files) pairs of
  // them to hold between runs; this layer (--layers) is not held to that,
  // and keeps its run about two minutes long with 21 each.
  const long = quick ? 2 : 21;
  const bulk = quick ? 2 : 21;
  try {
    log('envd: exec round trip');
    const bashTrue = ['/bin/bash', ['-l', '-c', 'true']];
    const [viaEnvd, local] = await timePair(() => runViaEnvd(envd, ...bashTrue), () => runLocally(...bashTrue), { warmup: 5, iterations });
    rows.push(row({ suite: 'envd', name: 'exec `bash -l -c true` round trip', unit: 'ms', value: viaEnvd, baseline: local, baselineName: 'local spawn of the same', target: { on: 'ratio', op: '<=', value: 1.5 } }));
    const [plainEnvd, plainLocal] = await timePair(() => runViaEnvd(envd, '/bin/true', []), () => runLocally('/bin/true', []), { warmup: 5, iterations });
    rows.push(row({ suite: 'envd', name: 'exec `/bin/true` round trip', unit: 'ms', value: plainEnvd, baseline: plainLocal, baselineName: 'local spawn of the same' }));

    log('envd: stdout throughput');
    const size = quick ? 64 : 256;
    const head = ['/usr/bin/head', ['-c', `${size}M`, '/dev/zero']];
    const [outEnvd, outLocal] = await throughputPair(() => runViaEnvd(envd, ...head), () => base.pipe(...head, { user }), { warmup: 1, iterations: long });
    rows.push(row({ suite: 'envd', name: `stdout throughput (head -c ${size}M)`, unit: 'MiB/s', value: outEnvd, baseline: outLocal, baselineName: 'local pipe', lowerIsBetter: false, target: { on: 'ratio', op: '>=', value: 0.25 } }));

    log('envd: file transfer');
    // Sent from memory, as the loopback baseline sends, as one raw body
    // (octet-stream): this row is about envd, and what the SDK adds is the
    // SDK suite's to show.
    const src = join(envd.dir, 'payload.bin');
    const fileSize = size * MiB;
    const payload = randomBytes(fileSize);
    writeFileSync(src, payload);
    const tcp = () => base.loopbackTcp(fileSize);
    settleDisk();
    const [upload, tcpUp] = await throughputPair(
      async () => {
        await envd.files.upload('upload.bin', payload, { encoding: 'octet-stream' });
        return fileSize;
      },
      tcp,
      { warmup: 1, iterations: bulk },
    );
    settleDisk();
    // The fs copy in the same alternation, in every ninth round, as in the sdk suite.
    const [download, tcpDown, fsCopy] = await throughputAlternated(
      async () => {
        let bytes = 0;
        for await (const c of await envd.files.download('upload.bin', { format: 'node-stream' })) bytes += c.length;
        if (bytes !== fileSize) throw new Error(`download returned ${bytes} bytes`);
        return bytes;
      },
      [tcp, { fn: () => base.copyFile(src, join(envd.dir, 'copy.bin')), every: 9 }],
      { warmup: 1, iterations: bulk },
    );
    settleDisk();
    rows.push(row({ suite: 'envd', name: `upload ${size} MiB (POST /files)`, unit: 'MiB/s', value: upload, baseline: tcpUp, baselineName: 'loopback TCP in Node', lowerIsBetter: false, target: { on: 'ratio', op: '>=', value: 0.5 } }));
    rows.push(row({ suite: 'envd', name: `download ${size} MiB (GET /files)`, unit: 'MiB/s', value: download, baseline: tcpDown, baselineName: 'loopback TCP in Node', lowerIsBetter: false, target: { on: 'ratio', op: '>=', value: 0.5 } }));
    rows.push(row({ suite: 'envd', name: `download ${size} MiB (GET /files)`, unit: 'MiB/s', value: download, baseline: fsCopy, baselineName: 'fs stream copy', lowerIsBetter: false }));

    settleDisk();
    log('envd: ListDir of 10 000 entries');
    const big = join(envd.dir, 'many');
    mkdirSync(big);
    for (let i = 0; i < 10_000; i++) writeFileSync(join(big, `f${String(i).padStart(5, '0')}`), '');
    const [list, direct] = await timePair(
      async () => {
        const { entries } = await envd.fs.listDir({ path: big, depth: 1 });
        if (entries.length !== 10_000) throw new Error(`ListDir returned ${entries.length}`);
      },
      () => base.listDir(big),
      { warmup: 2, iterations: quick ? 5 : 15 },
    );
    rows.push(row({ suite: 'envd', name: 'ListDir of 10 000 entries', unit: 'ms', value: list, baseline: direct, baselineName: 'readdir + lstat each, in process' }));

    log('envd: watch event latency');
    const wdir = join(envd.dir, 'watched');
    mkdirSync(wdir);
    const watches = quick ? 30 : 150; // as in the sdk suite
    // The file is written here in both, as in the subject: the baseline's
    // event comes from the local HTTP service's stream instead of envd's.
    const localDir = join(envd.dir, 'watched-local');
    const localWatch = await base.localWatch(localDir);
    const envdWatch = await watchEvents(envd, wdir);
    try {
      const [latency, localLatency] = await timePair(
        () => envdWatch.sample(),
        () => localWatch.sample((name) => writeFileSync(join(localDir, name), 'x')),
        { warmup: 3, iterations: watches },
      );
      rows.push(row({ suite: 'envd', name: 'watch latency (write → event)', unit: 'ms', value: latency, baseline: localLatency, baselineName: 'the same with a local HTTP service (fs.watch, streamed event)' }));
    } finally {
      await envdWatch.close();
      await localWatch.close();
    }
  } finally {
    await base.close();
    await envd.stop();
  }
  return rows;
}

/**
 * envd's WatchDir on `dir`, kept open: `sample()` writes a new file there
 * and resolves once envd streamed its event; `close` ends the watch.
 */
async function watchEvents(envd, dir) {
  const abort = new AbortController();
  const it = envd.fs.watchDir({ path: dir }, { signal: abort.signal })[Symbol.asyncIterator]();
  await it.next(); // start
  let waiting;
  const pump = (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        if (r.value.event.case === 'filesystem' && waiting && r.value.event.value.name === waiting.name) waiting.resolve();
      }
    } catch {
      // aborted
    }
  })();
  let written = 0;
  return {
    async sample() {
      const name = `f${written++}`;
      const seen = new Promise((resolve) => (waiting = { name, resolve }));
      writeFileSync(join(dir, name), 'x');
      await seen;
    },
    async close() {
      abort.abort();
      await pump;
    },
  };
}
