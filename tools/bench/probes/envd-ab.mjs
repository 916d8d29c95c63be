// Probe, not part of `npm run bench`: two builds of envd side by side, on the
// host, each on a unix socket of its own, sent the same request in
// alternation (A B, B A, ...) on one kept connection each: a `POST /files`
// of SIZE bytes (octet-stream) or a `GET /files` of a file of SIZE bytes. For
// each block it prints both p50s and the median of the paired ratios B/A;
// the machine's slow moments fall on both alike. Run it with A and B the same
// build first: what that prints is the probe's own bias (the second envd
// started has read 1.0 to 1.2 here).
//
// Made to measure a change to envd's per-request path, as in:
//
//   cp -r packages/envd/dist /tmp/envd-before     # before the change
//   ... change envd, npm run build -w @paddock/envd ...
//   A=/tmp/envd-before/main.cjs OP=post SIZE=1 node tools/bench/probes/envd-ab.mjs
//
// A defaults to packages/envd/dist/main.cjs; B to A. A copied dist keeps
// its code cache (dist/envd.cjs.cache), which is valid wherever it is.
// Needs root (envd sets each file's owner), as the envd tests do.
import { envdNodeFlags } from '@paddock/envd';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const op = process.env.OP ?? 'post';
if (op !== 'post' && op !== 'get') throw new Error(`OP must be post or get, not '${op}'`);
const SIZE = +(process.env.SIZE ?? 1);
const N = +(process.env.N ?? 1500);
const BLOCKS = +(process.env.BLOCKS ?? 4);
const WARMUP = 50;
const current = new URL('../../../packages/envd/dist/main.cjs', import.meta.url).pathname;
const builds = { A: process.env.A ?? current, B: process.env.B ?? process.env.A ?? current };

/** A request on one kept connection; resolves with the status once the whole answer has come. */
function requester(socket, message) {
  let pending = Buffer.alloc(0);
  let waiter;
  socket.on('data', (d) => {
    pending = Buffer.concat([pending, d]);
    const end = pending.indexOf('\r\n\r\n');
    if (end < 0) return;
    const length = Number(/content-length: (\d+)/i.exec(pending.subarray(0, end).toString('latin1'))?.[1]);
    if (!(pending.length >= end + 4 + length)) return;
    const status = pending.subarray(9, 12).toString('latin1');
    pending = pending.subarray(end + 4 + length);
    waiter(status);
  });
  return () =>
    new Promise((resolve) => {
      waiter = resolve;
      socket.write(message);
    });
}

async function start(name, main) {
  const dir = mkdtempSync(join(tmpdir(), `envd-ab-${name}-`));
  const socketPath = join(dir, 'envd.sock');
  const target = join(dir, 'f.bin');
  if (op === 'get') writeFileSync(target, Buffer.alloc(SIZE, 0x61));
  const child = spawn(process.execPath, [...envdNodeFlags, main, '--socket', socketPath, '--default-user', 'root', '--default-workdir', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  while (!existsSync(socketPath)) {
    if (child.exitCode !== null) throw new Error(`envd ${name} (${main}) exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const socket = connect(socketPath);
  await new Promise((r) => socket.once('connect', r));
  const query = `path=${encodeURIComponent(target)}&username=root`;
  const message =
    op === 'post'
      ? Buffer.concat([Buffer.from(`POST /files?${query} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: ${SIZE}\r\n\r\n`), Buffer.alloc(SIZE, 0x61)])
      : Buffer.from(`GET /files?${query} HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: identity\r\n\r\n`);
  const send = requester(socket, message);
  return {
    async timed() {
      const t = performance.now();
      const status = await send();
      if (status !== '200') throw new Error(`envd ${name} answered ${status}`);
      return performance.now() - t;
    },
    async stop() {
      socket.destroy();
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const envds = { A: await start('A', builds.A), B: await start('B', builds.B) };
try {
  console.log(`${op.toUpperCase()} /files of ${SIZE} bytes; A = ${builds.A}, B = ${builds.B}`);
  const blockRatios = [];
  for (let block = 0; block < BLOCKS; block++) {
    const times = { A: [], B: [] };
    for (let i = 0; i < WARMUP + N; i++) {
      for (const k of i % 2 ? ['A', 'B'] : ['B', 'A']) {
        const ms = await envds[k].timed();
        if (i >= WARMUP) times[k].push(ms);
      }
    }
    const ratio = median(times.A.map((a, i) => times.B[i] / a));
    blockRatios.push(ratio);
    console.log(`block ${block}: A p50 ${median(times.A).toFixed(3)} ms, B p50 ${median(times.B).toFixed(3)} ms, paired B/A ${ratio.toFixed(3)}`);
  }
  console.log(`B/A, the median over the blocks: ${median(blockRatios).toFixed(3)} (${blockRatios.map((r) => r.toFixed(2)).join(', ')})`);
} finally {
  await envds.A.stop();
  await envds.B.stop();
}
