#!/usr/bin/env node
// The sandbox proxy alone: file-sized uploads and downloads from an undici
// client (as the SDK sends them) through the proxy's relay to a Node http
// server on a unix socket (what envd is to the proxy), each relay in a
// process of its own as in `paddock start`. The relays are run in
// alternation in one run, so that a shared machine's load falls on all,
// next to loopback TCP and to the client talking to the upstream directly.
//
//   node tools/bench/proxy.mjs [--relays library,fast,git:REF,pipe] [--rounds N] [--sizes 256,1] [--only upload,download] [--piece KiB]
//
// A relay is `library` or `fast` (packages/server/dist, built, with the fast
// path switched off or on), `git:REF` (packages/server/src/relay and native/
// at REF, built into a temporary directory), `dir:PATH` (a directory holding
// dist/relay/relay.js), or `pipe` (no HTTP: each client connection piped to
// an upstream connection of its own, the most a relay in JavaScript can do).
import { execFileSync, fork } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { alternate, benchNodeFlags, loopbackTcp, MiB } from './lib.mjs';

const self = fileURLToPath(import.meta.url);
const root = fileURLToPath(new URL('../../', import.meta.url));
const server = join(root, 'packages/server');

/** Builds the relay of git revision `ref` into a temporary directory; gives that directory. */
function buildAt(ref) {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-relay-'));
  const files = execFileSync('git', ['ls-tree', '-r', '--name-only', ref, 'packages/server/src/relay', 'packages/server/src/connection-limit.ts', 'packages/server/native', 'packages/server/binding.gyp'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  for (const f of files) {
    const to = join(dir, f.slice('packages/server/'.length));
    mkdirSync(join(to, '..'), { recursive: true });
    writeFileSync(to, execFileSync('git', ['show', `${ref}:${f}`], { cwd: root }));
  }
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'es2022', module: 'nodenext', outDir: 'dist', rootDir: 'src', strict: true, skipLibCheck: true, types: ['node'] }, include: ['src'] }),
  );
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(join(root, 'node_modules/.bin/tsc'), ['-p', dir], { stdio: 'inherit' });
  if (files.includes('packages/server/binding.gyp')) execFileSync(join(root, 'node_modules/.bin/node-gyp'), ['rebuild', '--silent'], { cwd: dir, stdio: 'inherit' });
  return dir;
}

// ---- helper processes: the upstream and a relay --------------------------------------------

/** envd's part: takes an upload's body and answers; sends a download of `?size=` bytes in pieces of `pieceKiB` (a file stream's are 64 KiB). */
async function serveUpstream({ socketPath, pieceKiB }) {
  const piece = Buffer.alloc(pieceKiB * 1024, 7);
  const srv = createServer((req, res) => {
    const size = Number(new URL(req.url, 'http://x').searchParams.get('size') ?? 0);
    if (req.method === 'POST') {
      let n = 0;
      req.on('data', (c) => (n += c.length));
      req.on('end', () => res.end(JSON.stringify([{ name: 'f', bytes: n }])));
      return;
    }
    req.resume();
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    let left = size;
    const more = () => {
      while (left > 0) {
        const n = Math.min(left, piece.length);
        left -= n;
        if (!res.write(n === piece.length ? piece : piece.subarray(0, n))) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  srv.keepAliveTimeout = 65_000;
  await new Promise((r) => srv.listen(socketPath, r));
  return { value: socketPath, close: () => srv.close() };
}

async function serveRelay({ kind, dir, socketPath }) {
  const open = () =>
    new Promise((resolve, reject) => {
      const s = connect(socketPath);
      s.once('connect', () => resolve(s)).once('error', reject);
    });
  if (kind === 'pipe') {
    const srv = createNetServer(async (client) => {
      const up = await open();
      client.pipe(up).pipe(client);
      const both = () => (client.destroy(), up.destroy());
      client.on('error', both).on('close', both);
      up.on('error', both).on('close', both);
    });
    await new Promise((r) => srv.listen(0, '127.0.0.1', r));
    return { value: srv.address().port, close: () => srv.close() };
  }
  const dest = { name: 'upstream', poolKey: socketPath, open };
  const route = async () => dest;
  // A tree with the switch (./index.js) has both paths; an older one has its relay only.
  const relay = existsSync(join(dir, 'dist/relay/index.js'))
    ? (await import(join(dir, 'dist/relay/index.js'))).createRelay({ fastPath: kind === 'fast', route })
    : new (await import(join(dir, 'dist/relay/relay.js'))).Relay({ route });
  const srv = relay.server;
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { value: srv.address().port, close: () => (relay.destroyConnections?.(), srv.close()) };
}

const roles = { upstream: serveUpstream, relay: serveRelay };

if (process.argv[2] === '--helper') {
  const { value, close } = await roles[process.argv[3]](JSON.parse(process.argv[4]));
  process.send({ ready: true, value });
  process.on('message', async (m) => {
    if (m.op === 'close') {
      await close();
      process.exit(0);
    }
  });
} else {
  await main();
}

function helper(role, arg, execArgv = benchNodeFlags) {
  const child = fork(self, ['--helper', role, JSON.stringify(arg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ value: m.value, close: () => (child.connected && child.send({ op: 'close' }), new Promise((r) => child.once('exit', r))) }));
    child.once('exit', (code) => reject(new Error(`${role} helper exited (${code})`)));
  });
}

async function main() {
  const { values } = parseArgs({
    options: {
      relays: { type: 'string', default: 'library,fast' },
      rounds: { type: 'string', default: '5' },
      sizes: { type: 'string', default: '256,1' },
      only: { type: 'string', default: 'upload,download' },
      piece: { type: 'string', default: '64' },
    },
  });
  const work = mkdtempSync(join(tmpdir(), 'paddock-proxy-bench-'));
  const helpers = [];
  const temps = [work];
  try {
    const socketPath = join(work, 'envd.sock');
    const up = await helper('upstream', { socketPath, pieceKiB: Number(values.piece) });
    helpers.push(up);
    const relays = [];
    for (const spec of values.relays.split(',')) {
      let dir = server;
      if (spec.startsWith('git:')) temps.push((dir = buildAt(spec.slice(4))));
      if (spec.startsWith('dir:')) dir = spec.slice(4);
      const kind = spec.split(':')[0];
      const h = await helper('relay', { kind, dir, socketPath }, (await import('@paddock/server')).serverNodeFlags);
      helpers.push(h);
      relays.push({ spec, port: h.value });
    }
    const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
    const direct = new Agent({ headersTimeout: 0, bodyTimeout: 0, connect: { socketPath } });
    const headers = { 'e2b-sandbox-id': 'x', 'content-type': 'application/octet-stream' };
    const upload = (origin, dispatcher, payload) => async () => {
      const res = await request(`${origin}/files?path=f`, { method: 'POST', headers, body: payload, dispatcher });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`upload answered ${res.statusCode}`);
      return payload.length;
    };
    const download = (origin, dispatcher, size) => async () => {
      const res = await request(`${origin}/files?path=f&size=${size}`, { headers, dispatcher });
      let n = 0;
      for await (const c of res.body) n += c.length;
      if (n !== size) throw new Error(`download gave ${n} of ${size} bytes`);
      return n;
    };
    const table = [];
    const round = (v) => Number(v.toPrecision(3));
    for (const mib of values.sizes.split(',').map(Number)) {
      const size = mib * MiB;
      const payload = Buffer.alloc(size, 3);
      const iterations = mib >= 64 ? Number(values.rounds) : Number(values.rounds) * 8;
      for (const [what, make] of [
        ['upload', (o, d) => upload(o, d, payload)],
        ['download', (o, d) => download(o, d, size)],
      ]) {
        if (!values.only.split(',').includes(what)) continue;
        const fns = [...relays.map((r) => make(`http://127.0.0.1:${r.port}`, agent)), make('http://localhost', direct), () => loopbackTcp(size)];
        const alt = alternate(fns, { rate: true });
        await alt.take({ warmup: 1, iterations });
        const results = alt.result();
        const tcp = results.at(-1);
        const cell = (x) => `${round(x.p50)} (${round(x.p50 / tcp.p50)})`;
        const line = { row: `${what} ${mib} MiB`, n: tcp.n, tcp: round(tcp.p50), direct: cell(results.at(-2)) };
        relays.forEach((r, i) => (line[r.spec] = cell(results[i])));
        table.push(line);
        console.error(`${what} ${mib} MiB done`);
      }
    }
    await agent.close();
    await direct.close();
    console.log('MiB/s (p50), and in brackets its ratio to loopback TCP in the same run');
    console.table(table);
  } finally {
    for (const h of helpers.reverse()) await h.close().catch(() => undefined);
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  }
}
