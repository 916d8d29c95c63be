// Probe, not part of `npm run bench`: would a loopback baseline that spans two
// processes move with Paddock's transfers better than the bench's one does?
// The bench's `loopbackTcp` (lib.mjs) sends and receives in one process, on
// one thread; a transfer through Paddock crosses the client, the proxy and
// envd, on both CPUs. Between runs the 256 MiB download rows moved more in
// their ratio than in their own p50, as if the baseline added variation
// rather than cancelling it.
//
// In each round this probe takes N triples, in rotating order: a
// files.read of MIB MiB through @paddock/sdk, the bench's one-process
// loopback, and a two-process loopback (a sender process that connects
// afresh to a sink process, sends, half-closes and waits for the sink's
// one-byte answer). Both baselines are timed in the sender process, as the
// bench times its baselines. It prints, per round, the median ratio of the
// SDK read to each baseline; rounds are GAP seconds apart, so that they
// meet the host in different states; at the end, each ratio's spread over
// the rounds (coefficient of variation), next to the SDK read's own.
//
//   ROUNDS=6 GAP=45 N=15 MIB=256 node --initial-old-space-size=64 tools/bench/probes/two-process-loopback.mjs
import { Sandbox } from '@paddock/sdk';
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from '../child-calls.mjs';
import { benchNodeFlags, loopbackTcp, settleDisk, summarize, timedHere } from '../lib.mjs';
import { startServerProcess } from '../server-process.mjs';

const self = fileURLToPath(import.meta.url);
const MiB = 1 << 20;

/** Sends `size` bytes to the sink at `port` on a new connection; resolves once the sink has seen them all. */
async function sendToSink(port, size) {
  const chunk = Buffer.alloc(MiB);
  const sock = connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  for (let sent = 0; sent < size; sent += MiB) {
    if (!sock.write(chunk.subarray(0, Math.min(MiB, size - sent)))) await new Promise((r) => sock.once('drain', r));
  }
  const answered = new Promise((resolve) => sock.once('data', resolve));
  sock.end();
  await answered;
  sock.destroy();
  return size;
}

if (process.argv[2] === '--sink') {
  const server = createServer((sock) => {
    sock.on('data', () => {});
    sock.once('end', () => sock.end('k'));
  });
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  process.once('disconnect', () => process.exit(0));
} else if (process.argv[2] === '--sender') {
  const sink = fork(self, ['--sink'], { execArgv: benchNodeFlags });
  const { port } = await new Promise((resolve) => sink.once('message', resolve));
  answerCalls(
    {
      oneProcess: ({ size }) => timedHere(() => loopbackTcp(size)),
      twoProcesses: ({ size }) => timedHere(() => sendToSink(port, size)),
      close: () => sink.kill(),
    },
    null,
  );
} else {
  const KEY = 'e2b_' + 'd'.repeat(40);
  const ROUNDS = +(process.env.ROUNDS ?? 6);
  const GAP = +(process.env.GAP ?? 45);
  const N = +(process.env.N ?? 15);
  const size = Math.round(+(process.env.MIB ?? 256) * MiB);
  const median = (xs) => summarize(xs).p50;
  const cv = (xs) => {
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    return (100 * Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length)) / mean;
  };
  const home = mkdtempSync(join(tmpdir(), 'two-loopback-'));
  const server = await startServerProcess({ home, warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
  const sender = fork(self, ['--sender'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: benchNodeFlags });
  const { call, closed } = await callsTo(sender, 'sender process');
  try {
    const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, secure: false, timeoutMs: 3600_000 });
    await sbx.files.write('probe.bin', randomBytes(size));
    settleDisk();
    const rate = (ms) => size / MiB / (ms / 1000);
    const ways = {
      sdk: async () => {
        const t = performance.now();
        let bytes = 0;
        for await (const c of await sbx.files.read('probe.bin', { format: 'stream' })) bytes += c.length;
        if (bytes !== size) throw new Error(`read ${bytes} bytes`);
        return rate(performance.now() - t);
      },
      one: async () => rate((await call('oneProcess', { size })).elapsedMs),
      two: async () => rate((await call('twoProcesses', { size })).elapsedMs),
    };
    const order = Object.keys(ways);
    for (const w of order) await ways[w]();
    const rounds = [];
    console.log(`files.read of ${size / MiB} MiB through @paddock/sdk against loopback, ${N} triples a round, ${GAP} s apart`);
    for (let r = 0; r < ROUNDS; r++) {
      if (r) await new Promise((resolve) => setTimeout(resolve, GAP * 1000));
      const got = { sdk: [], one: [], two: [] };
      for (let i = 0; i < N; i++) {
        // Rotated, so that no way always follows the same one.
        for (let k = 0; k < order.length; k++) {
          const w = order[(i + k) % order.length];
          got[w].push(await ways[w]());
        }
      }
      const round = {
        sdk: median(got.sdk),
        one: median(got.one),
        two: median(got.two),
        toOne: median(got.sdk.map((x, i) => x / got.one[i])),
        toTwo: median(got.sdk.map((x, i) => x / got.two[i])),
      };
      rounds.push(round);
      console.log(
        `round ${r + 1}: sdk ${round.sdk.toFixed(0)} MiB/s, one process ${round.one.toFixed(0)}, two processes ${round.two.toFixed(0)}; ratio to one ${round.toOne.toFixed(3)}, to two ${round.toTwo.toFixed(3)}`,
      );
    }
    const spread = (k) => cv(rounds.map((x) => x[k])).toFixed(1);
    console.log(`spread over rounds (cv %): sdk ${spread('sdk')}, one ${spread('one')}, two ${spread('two')}; ratio to one ${spread('toOne')}, ratio to two ${spread('toTwo')}`);
    await sbx.kill();
  } finally {
    await call('close').catch(() => {});
    await closed;
    await server.close();
    rmSync(home, { recursive: true, force: true });
  }
}
