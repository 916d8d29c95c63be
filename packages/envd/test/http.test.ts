// envd's plain HTTP routes: health, metrics, envs, init and files.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { Agent, request, type ClientRequest } from 'node:http';
import { once } from 'node:events';
import { createServer, connect as netConnect } from 'node:net';
import { connect } from 'node:http2';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gunzipSync, gzipSync } from 'node:zlib';
import { fileSignature } from '../src/auth.js';
import { filesystem, memoryOf, processes, resetPeakMemory, startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd();
});
afterAll(() => envd.stop());

const MiB = 1024 * 1024;

/** Resolves once `check` holds; fails after 10 s. */
async function until(check: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !check(); ) {
    if (Date.now() > deadline) throw new Error(`still not so after 10 s: ${check}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
const auth = () => ({ 'x-access-token': envd.token! });
const url = (path: string, query: Record<string, string> = {}) => `${envd.url}${path}?${new URLSearchParams(query)}`;

async function post(query: Record<string, string>, body: NonNullable<RequestInit['body']>, headers: Record<string, string> = {}) {
  return fetch(url('/files', query), {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', ...auth(), ...headers },
    body,
    duplex: 'half',
  } as RequestInit);
}

/**
 * Tells, request by request, whether each went over the connection the first
 * one opened. Not `req.reusedSocket`: that is set only when a request finds
 * the socket idle in the agent's pool. A request made the moment the last
 * response ended can find it still busy (its request's end not yet flushed),
 * wait in the agent's queue, and then get the same socket with
 * `reusedSocket` false.
 */
function firstConnection(): (req: ClientRequest) => boolean {
  let first: unknown;
  return (req) => {
    first ??= req.socket;
    return req.socket === first;
  };
}

/** A readable stream of `size` pseudo-random bytes, hashed as it goes. */
function randomSource(size: number) {
  const hash = createHash('sha256');
  let left = size;
  const stream = new Readable({
    read() {
      if (left === 0) return void this.push(null);
      const n = Math.min(left, 1 * MiB);
      const chunk = randomBytes(n);
      hash.update(chunk);
      left -= n;
      this.push(chunk);
    },
  });
  return { stream, digest: () => hash.digest('hex') };
}

test('GET /health answers 204 without a token', async () => {
  const res = await fetch(`${envd.url}/health`);
  expect(res.status).toBe(204);
});

test('GET /metrics needs the token and has every field', async () => {
  expect((await fetch(`${envd.url}/metrics`)).status).toBe(401);
  const res = await fetch(`${envd.url}/metrics`, { headers: auth() });
  expect(res.status).toBe(200);
  const m = (await res.json()) as Record<string, number>;
  for (const key of ['ts', 'cpu_count', 'cpu_used_pct', 'mem_total', 'mem_used', 'mem_cache', 'mem_total_mib', 'mem_used_mib', 'disk_used', 'disk_total']) {
    expect(typeof m[key]).toBe('number');
  }
  expect(m.cpu_count).toBeGreaterThanOrEqual(1);
  expect(m.mem_used).toBeLessThanOrEqual(m.mem_total!);
  expect(m.mem_total_mib).toBe(Math.floor(m.mem_total! / MiB));
  expect(m.disk_used).toBeLessThanOrEqual(m.disk_total!);
  expect(Math.abs(m.ts! - Date.now() / 1000)).toBeLessThan(5);
});

test('POST /init sets variables, default user and a new token; GET /envs shows them', async () => {
  const other = await startEnvd({ token: null });
  try {
    const init = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${other.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await init({ envVars: { A: 1 } })).status).toBe(400);
    expect(await (await init({ defaultUser: 'ghost' })).json()).toEqual({ code: 400, message: "defaultUser 'ghost' does not exist" });
    expect((await init({ envVars: { A: '1' }, accessToken: 'fresh', defaultUser: 'root', timestamp: new Date().toISOString() })).status).toBe(204);
    // From now on the token is required, also for /init.
    expect((await fetch(`${other.url}/envs`)).status).toBe(401);
    expect((await init({ envVars: { B: '2' } })).status).toBe(401);
    expect((await init({ envVars: { B: '2' } }, { 'x-access-token': 'fresh' })).status).toBe(204);
    expect(await (await fetch(`${other.url}/envs`, { headers: { 'x-access-token': 'fresh' } })).json()).toEqual({ A: '1', B: '2' });
    const { entry } = await filesystem(other, { token: 'fresh' }).makeDir({ path: 'as-default' });
    expect(entry).toMatchObject({ path: join(other.home.root, 'as-default'), owner: 'root' });
  } finally {
    await other.stop();
  }
});

test('POST /init with a timestamp succeeds and leaves the clock alone', async () => {
  // A sandbox shares the host's clock: setting it from /init would move the
  // host's clock too. A time years off would show in this process and in the
  // sandbox's processes alike.
  const past = '2001-02-03T04:05:06Z';
  const res = await fetch(`${envd.url}/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth() },
    body: JSON.stringify({ timestamp: past }),
  });
  expect(res.status).toBe(204);
  const yearNow = new Date().getUTCFullYear();
  expect(yearNow).toBeGreaterThan(2001);
  const out: Uint8Array[] = [];
  for await (const r of processes(envd).start({ process: { cmd: 'date', args: ['-u', '+%Y'] }, stdin: false })) {
    if (r.event?.event.case === 'data' && r.event.event.value.output.case === 'stdout') out.push(r.event.event.value.output.value);
  }
  expect(Buffer.concat(out).toString()).toMatch(/^\d{4}\n$/);
  expect(Number(Buffer.concat(out).toString())).toBeGreaterThanOrEqual(yearNow);
  // It is still checked for its type.
  const bad = await fetch(`${envd.url}/init`, { method: 'POST', headers: auth(), body: JSON.stringify({ timestamp: 7 }) });
  expect([bad.status, await bad.json()]).toEqual([400, { code: 400, message: "field 'timestamp' must be a string" }]);
});

test('POST /streams/end ends the process output and watch streams under way with the reason, leaves the processes running and later streams alone', async () => {
  const dir = join(envd.dir, 'work', `streams-end-${Date.now()}`);
  mkdirSync(dir);
  let pid = 0;
  const follow = (async () => {
    for await (const r of processes(envd).start({ process: { cmd: '/bin/sleep', args: ['30'] }, stdin: false })) {
      if (r.event?.event.case === 'start') pid = r.event.event.value.pid;
    }
    return 'no error';
  })().catch((err: Error) => err.message);
  let watched = 0;
  const watch = (async () => {
    for await (const _ of filesystem(envd).watchDir({ path: dir })) watched++;
    return 'no error';
  })().catch((err: Error) => err.message);
  await until(() => pid > 0);
  // The watch is under way once a change in the directory reaches it.
  for (let i = 0; watched === 0 && i < 100; i++) {
    writeFileSync(join(dir, `f${i}`), '');
    await new Promise((r) => setTimeout(r, 50));
  }
  const endStreams = (body: unknown, headers: Record<string, string> = auth()) =>
    fetch(`${envd.url}/streams/end`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  expect((await endStreams({ reason: 'x' }, {})).status).toBe(401);
  const bad = await endStreams({ reason: '' });
  expect(bad.status).toBe(400);
  expect(await bad.json()).toMatchObject({ message: "field 'reason' must be a string of 1 to 500 characters" });

  const res = await endStreams({ reason: 'the control plane is stopping' });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ ended: 2 });
  expect(await follow).toBe('[unavailable] the control plane is stopping');
  expect(await watch).toBe('[unavailable] the control plane is stopping');
  // The process was not touched.
  expect(() => process.kill(pid, 0)).not.toThrow();
  // A stream begun afterwards is not ended by the earlier call, and nothing else is under way.
  const out: Buffer[] = [];
  for await (const r of processes(envd).start({ process: { cmd: 'echo', args: ['after'] }, stdin: false })) {
    if (r.event?.event.case === 'data' && r.event.event.value.output.case === 'stdout') out.push(Buffer.from(r.event.event.value.output.value));
  }
  expect(Buffer.concat(out).toString()).toBe('after\n');
  expect(await (await endStreams({ reason: 'again' })).json()).toEqual({ ended: 0 });
  process.kill(pid, 'SIGKILL');
});

test('POST /init with a body over 1 MiB is 413, and the connection still answers', async () => {
  const big = JSON.stringify({ envVars: { BIG: 'x'.repeat(2 * 1024 * 1024) } });
  const res = await fetch(`${envd.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth() }, body: big });
  expect([res.status, await res.json()]).toEqual([413, { code: 413, message: 'request body is larger than 1048576 bytes' }]);
  expect((await fetch(`${envd.url}/health`)).status).toBe(204);
});

test('unknown routes are 404 and wrong methods 405, both with a JSON body', async () => {
  const missing = await fetch(`${envd.url}/nope`, { headers: auth() });
  expect(missing.status).toBe(404);
  expect(await missing.json()).toEqual({ code: 404, message: 'no route for GET /nope' });
  const wrong = await fetch(`${envd.url}/files?path=x`, { method: 'DELETE', headers: auth() });
  expect(wrong.status).toBe(405);
  expect(wrong.headers.get('allow')).toBe('GET, POST');
});

describe('files', () => {
  test('an octet-stream upload creates parents owned by the user; the download streams it back', async () => {
    const res = await post({ path: 'docs/a/hello.txt' }, 'hello world');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([{ name: 'hello.txt', path: join(envd.home.user, 'docs/a/hello.txt'), type: 'file' }]);
    const st = statSync(join(envd.home.user, 'docs/a/hello.txt'));
    expect([st.uid, st.gid, st.mode & 0o777]).toEqual([1000, 1000, 0o644]);
    expect(statSync(join(envd.home.user, 'docs')).uid).toBe(1000);
    const got = await fetch(url('/files', { path: 'docs/a/hello.txt' }), { headers: auth() });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/octet-stream');
    expect(await got.text()).toBe('hello world');
  });

  test('writing as root makes root-owned files; rewriting keeps the owner', async () => {
    await post({ path: '/tmp/../' + join(envd.dir, 'work/owned-by-root'), username: 'root' }, 'x');
    expect(statSync(join(envd.dir, 'work/owned-by-root')).uid).toBe(0);
    await post({ path: join(envd.dir, 'work/owned-by-root'), username: 'user' }, 'y');
    expect(statSync(join(envd.dir, 'work/owned-by-root')).uid).toBe(0);
    expect(readFileSync(join(envd.dir, 'work/owned-by-root'), 'utf8')).toBe('y');
  });

  test('rewriting a file in place leaves exactly the new content, shorter, longer or empty; the inode stays', async () => {
    const path = join(envd.home.user, 'rewritten.bin');
    const old = randomBytes(3 * MiB);
    writeFileSync(path, old);
    const inode = statSync(path).ino;
    for (const content of [Buffer.from('short'), randomBytes(5 * MiB), Buffer.alloc(0)]) {
      expect((await post({ path: 'rewritten.bin' }, content)).status).toBe(200);
      expect(readFileSync(path).equals(content)).toBe(true);
      expect(statSync(path).ino).toBe(inode);
    }
  });

  test('a failed rewrite leaves what was written, none of what the file held before; every answer comes', async () => {
    const path = join(envd.home.user, 'failed.bin');
    // Valid gzip of 256 KiB, then 8 MiB of garbage: the first part is written, then the body
    // fails with most of the request still unread, which is dropped so that the answer comes.
    const part = randomBytes(256 * 1024);
    const body = Buffer.concat([gzipSync(part).subarray(0, -8), Buffer.from('not the end of a gzip stream'), randomBytes(8 * MiB)]);
    for (let round = 0; round < 6; round++) {
      writeFileSync(path, randomBytes(MiB));
      const res = await post({ path: 'failed.bin' }, body, { 'content-encoding': 'gzip' });
      expect([res.status, await res.json()]).toEqual([400, { code: 400, message: 'the request body is not valid gzip' }]);
      const left = readFileSync(path);
      expect(left.length).toBeLessThanOrEqual(part.length);
      expect(left.equals(part.subarray(0, left.length))).toBe(true);
    }
  });

  test('a full disk is 507 naming the file, which keeps what fit of the upload; a smaller one then succeeds', async () => {
    // A filesystem of 1.5 MiB under the user's home (envd runs as root here, as in a sandbox):
    // uploads are written 1 MiB at a time, so the second write is cut short and the third fails.
    const dir = join(envd.home.user, 'small-disk');
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1536k,uid=1000,gid=1000', 'tmpfs', dir]);
    try {
      // Each answer must come, on a kept-alive connection too: once a request left half read
      // held its connection, and every second upload waited for an answer forever.
      const content = randomBytes(40 * MiB);
      for (let round = 0; round < 6; round++) {
        for (const size of [3 * MiB, 40 * MiB]) {
          const res = await post({ path: 'small-disk/big.bin' }, content.subarray(0, size));
          expect([res.status, await res.json()]).toEqual([507, { code: 507, message: `no space left on device writing '${join(dir, 'big.bin')}'` }]);
          expect(readFileSync(join(dir, 'big.bin')).equals(content.subarray(0, 1536 * 1024))).toBe(true);
        }
      }
      // The space is there again once the file is small.
      expect((await post({ path: 'small-disk/big.bin' }, 'fits')).status).toBe(200);
      expect(readFileSync(join(dir, 'big.bin'), 'utf8')).toBe('fits');
    } finally {
      execFileSync('umount', [dir]);
    }
  });

  test('a chunked upload of 1 MiB and 100 KiB (a batch in the thread pool, the rest on the loop) arrives whole and in order', async () => {
    const path = join(envd.home.user, 'two-ways.bin');
    const source = randomSource(MiB + 100 * 1024);
    const res = await post({ path: 'two-ways.bin' }, Readable.toWeb(source.stream) as ReadableStream);
    expect(res.status).toBe(200);
    expect(createHash('sha256').update(readFileSync(path)).digest('hex')).toBe(source.digest());
  });

  test('a small upload, written without the thread pool, is 507 on a full disk too, and keeps what fit', async () => {
    const dir = join(envd.home.user, 'small-disk-2');
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1536k,uid=1000,gid=1000', 'tmpfs', dir]);
    try {
      const content = randomBytes(200 * 1024);
      // 100 KiB left: the first write is cut short there, and the next one fails.
      writeFileSync(join(dir, 'filler'), Buffer.alloc((1536 - 100) * 1024));
      const res = await post({ path: 'small-disk-2/small.bin' }, content);
      expect([res.status, await res.json()]).toEqual([507, { code: 507, message: `no space left on device writing '${join(dir, 'small.bin')}'` }]);
      expect(readFileSync(join(dir, 'small.bin')).equals(content.subarray(0, 100 * 1024))).toBe(true);
      // Nothing left: the first write fails.
      const none = await post({ path: 'small-disk-2/none.bin' }, content.subarray(0, 1000));
      expect([none.status, await none.json()]).toEqual([507, { code: 507, message: `no space left on device writing '${join(dir, 'none.bin')}'` }]);
      expect(readFileSync(join(dir, 'none.bin')).length).toBe(0);
    } finally {
      execFileSync('umount', [dir]);
    }
  });

  describe('bodies on kept-alive connections', () => {
    /** Sends `parts` on a connection of its own (a number waits that many ms); gives what comes back once the connection closes. */
    function rawUpload(head: string, parts: (Buffer | string | number)[]): Promise<string> {
      return new Promise((resolve, reject) => {
        const sock = netConnect(envd.port, '127.0.0.1');
        const got: Buffer[] = [];
        sock.on('data', (c: Buffer) => got.push(c));
        sock.on('error', reject);
        sock.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
        sock.on('connect', async () => {
          sock.write(head);
          for (const part of parts) {
            if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
            else sock.write(part);
          }
        });
      });
    }
    const uploadHead = (path: string, length: number) =>
      `POST /files?path=${encodeURIComponent(path)} HTTP/1.1\r\nHost: envd\r\nX-Access-Token: ${envd.token}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`;

    test('uploads of many sizes arrive exactly, one after another on one kept-alive connection', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const onFirst = firstConnection();
      try {
        for (const size of [256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 3 * MiB + 5, 64 * MiB + 7, 1]) {
          const body = randomBytes(size);
          const res = await new Promise<{ status: number; connection: string | undefined; onFirst: boolean }>((resolve, reject) => {
            const req = request(url('/files', { path: 'kept-alive.bin' }), { method: 'POST', agent, headers: { ...auth(), 'content-type': 'application/octet-stream', 'content-length': size } }, (r) => {
              r.resume();
              r.on('end', () => resolve({ status: r.statusCode!, connection: r.headers.connection, onFirst: onFirst(req) }));
            });
            req.on('error', reject);
            req.end(body);
          });
          expect([size, res.status, res.connection, res.onFirst]).toEqual([size, 200, 'keep-alive', true]);
          expect(readFileSync(join(envd.home.user, 'kept-alive.bin')).equals(body)).toBe(true);
        }
      } finally {
        agent.destroy();
      }
    });

    test('an upload that waits for 100 Continue (as curl sends one over 1 MiB) arrives, and the connection goes on', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const onFirst = firstConnection();
      const send = (path: string, body: Buffer) =>
        new Promise<{ status: number; continued: boolean; onFirst: boolean }>((resolve, reject) => {
          let continued = false;
          const req = request(url('/files', { path }), { method: 'POST', agent, headers: { ...auth(), 'content-type': 'application/octet-stream', 'content-length': body.length, expect: '100-continue' } }, (r) => {
            r.resume();
            r.on('end', () => resolve({ status: r.statusCode!, continued, onFirst: onFirst(req) }));
          });
          req.on('continue', () => {
            continued = true;
            req.end(body);
          });
          req.on('error', reject);
        });
      try {
        const bodies = [randomBytes(3 * MiB + 1), randomBytes(MiB)];
        for (const [i, body] of bodies.entries()) {
          expect(await send(`continue-${i}.bin`, body)).toEqual({ status: 200, continued: true, onFirst: true });
          expect(readFileSync(join(envd.home.user, `continue-${i}.bin`)).equals(body)).toBe(true);
        }
      } finally {
        agent.destroy();
      }
    });

    test('downloads of many sizes arrive exactly, on one kept-alive connection that then serves the next request', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const onFirst = firstConnection();
      const get = (path: string) =>
        new Promise<{ status: number; length: string | undefined; body: Buffer; onFirst: boolean }>((resolve, reject) => {
          const req = request(url('/files', { path }), { agent, headers: { ...auth(), 'accept-encoding': 'identity' } }, (r) => {
            const chunks: Buffer[] = [];
            r.on('data', (c: Buffer) => chunks.push(c));
            r.on('end', () => resolve({ status: r.statusCode!, length: r.headers['content-length'], body: Buffer.concat(chunks), onFirst: onFirst(req) }));
          });
          req.on('error', reject);
          req.end();
        });
      try {
        const sizes = [256 * 1024 - 1, 256 * 1024, 3 * MiB + 5, 1];
        for (const size of sizes) {
          const content = randomBytes(size);
          writeFileSync(join(envd.home.user, 'sent.bin'), content);
          const got = await get('sent.bin');
          expect([size, got.status, got.length, got.onFirst]).toEqual([size, 200, String(size), true]);
          expect(got.body.equals(content)).toBe(true);
        }
      } finally {
        agent.destroy();
      }
    });

    test('a file cut short while it is sent ends the download in failure, not as a whole short file; envd goes on', async () => {
      const path = join(envd.home.user, 'shrinking.bin');
      writeFileSync(path, randomBytes(64 * MiB));
      const outcome = await new Promise<{ error: string | undefined; received: number }>((resolve) => {
        const req = request(url('/files', { path: 'shrinking.bin' }), { headers: { ...auth(), 'accept-encoding': 'identity' } }, (res) => {
          let received = 0;
          res.once('data', (c: Buffer) => {
            received += c.length;
            // Not read on, the connection holds far less than the file, so most of the
            // file is still to be sent when it shrinks to half.
            res.pause();
            truncateSync(path, 32 * MiB);
            res.on('data', (more: Buffer) => (received += more.length));
            res.resume();
          });
          res.on('error', (err) => resolve({ error: err.message, received }));
          res.on('end', () => resolve({ error: undefined, received }));
        });
        req.on('error', (err) => resolve({ error: err.message, received: -1 }));
        req.end();
      });
      expect(outcome.error).toBe('aborted');
      expect(outcome.received).toBe(32 * MiB);
      expect((await fetch(`${envd.url}/health`)).status).toBe(204);
    });

    /** A request after an upload, which ends the connection once answered. */
    const lastRequest = 'GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n';
    /** The status lines and Connection headers of the answers in `raw`, in order. */
    const answers = (raw: string) =>
      raw
        .split(/(?=HTTP\/1\.1 \d{3} )/)
        .map((answer) => answer.slice(0, answer.indexOf('\r\n\r\n')))
        .map((head) => `${head.slice(9, 12)} ${/\r\nconnection: ([^\r]*)/i.exec(head)?.[1]?.toLowerCase()}`);

    test('a body that comes in pieces, the first with the head, arrives whole, and the connection reads the next request', async () => {
      const body = randomBytes(2 * MiB + 3);
      const head = uploadHead('pieces.bin', body.length);
      const answer = await rawUpload('', [Buffer.concat([Buffer.from(head), body.subarray(0, 1000)]), 30, body.subarray(1000, 300_000), 30, body.subarray(300_000, MiB), 30, body.subarray(MiB), 30, lastRequest]);
      expect(answers(answer)).toEqual(['200 keep-alive', '204 close']);
      expect(readFileSync(join(envd.home.user, 'pieces.bin')).equals(body)).toBe(true);
    });

    test('bytes after the body are not taken into the file: they are the next request', async () => {
      const body = randomBytes(MiB);
      const answer = await rawUpload(uploadHead('exact.bin', body.length), [Buffer.concat([body, Buffer.from(lastRequest)])]);
      expect(answers(answer)).toEqual(['200 keep-alive', '204 close']);
      expect(readFileSync(join(envd.home.user, 'exact.bin')).equals(body)).toBe(true);
    });

    test('when even the start of the body does not fit on the disk, Node reads and drops the rest: 507, and the connection goes on', async () => {
      const dir = join(envd.home.user, 'full-disk');
      mkdirSync(dir);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,uid=1000,gid=1000', 'tmpfs', dir]);
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const onFirst = firstConnection();
      const send = (path: string, body: Buffer) =>
        new Promise<{ status: number; text: string; onFirst: boolean }>((resolve, reject) => {
          const req = request(url('/files', { path }), { method: 'POST', agent, headers: { ...auth(), 'content-type': 'application/octet-stream', 'content-length': body.length } }, (r) => {
            let text = '';
            r.on('data', (c) => (text += c));
            r.on('end', () => resolve({ status: r.statusCode!, text, onFirst: onFirst(req) }));
          });
          req.on('error', reject);
          req.end(body);
        });
      try {
        writeFileSync(join(dir, 'filler'), Buffer.alloc(256 * 1024));
        const full = await send('full-disk/new.bin', randomBytes(MiB));
        expect([full.status, JSON.parse(full.text)]).toEqual([507, { code: 507, message: `no space left on device writing '${join(dir, 'new.bin')}'` }]);
        const next = await send('after-full.txt', Buffer.from('next'));
        expect([next.status, next.onFirst]).toEqual([200, true]);
        expect(readFileSync(join(envd.home.user, 'after-full.txt'), 'utf8')).toBe('next');
      } finally {
        agent.destroy();
        execFileSync('umount', [dir]);
      }
    });

    test('a client that goes away mid-body leaves the file with what was written of the upload, none of what it held, and envd goes on', async () => {
      const path = join(envd.home.user, 'cut.bin');
      writeFileSync(path, randomBytes(3 * MiB));
      // Uploads are written in batches of at least 1 MiB: one batch, and some of the next,
      // which waits in envd's memory when the client goes.
      const sent = randomBytes(MiB + 512 * 1024);
      const sock = netConnect(envd.port, '127.0.0.1');
      await new Promise((r) => sock.once('connect', r));
      sock.write(uploadHead('cut.bin', 4 * MiB));
      sock.write(sent);
      // Once envd has written the first batch, the client goes away.
      await until(() => readFileSync(path).subarray(0, MiB).equals(sent.subarray(0, MiB)));
      sock.destroy();
      // The file is then cut to what was written.
      await until(() => statSync(path).size < 3 * MiB);
      const left = readFileSync(path);
      expect(left.length).toBeGreaterThanOrEqual(MiB);
      expect(left.equals(sent.subarray(0, left.length))).toBe(true);
      expect((await post({ path: 'cut.bin' }, 'after')).status).toBe(200);
      expect(readFileSync(path, 'utf8')).toBe('after');
    });
  });

  test('an empty file downloads with content-length 0', async () => {
    await post({ path: 'empty' }, '');
    const got = await fetch(url('/files', { path: 'empty' }), { headers: auth() });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-length')).toBe('0');
    expect(await got.text()).toBe('');
  });

  test('files of /proc, which report a size of 0, download whole (chunked), gzipped too', async () => {
    for (const file of ['/proc/version', '/proc/self/status']) {
      const got = await fetch(url('/files', { path: file }), { headers: { ...auth(), 'accept-encoding': 'identity' } });
      expect(got.status).toBe(200);
      expect(got.headers.get('content-length')).toBeNull();
      const text = await got.text();
      expect(text.length).toBeGreaterThan(0);
      if (file === '/proc/version') expect(text).toBe(readFileSync(file, 'utf8'));
      // Newer Node versions name the main thread MainThread; older ones left it as node.
      else expect(text).toMatch(/^Name:\s+(node|MainThread)$/m);
    }
    // Identity is acceptable unless refused; refused, the text comes gzipped.
    const zipped = await fetch(url('/files', { path: '/proc/version' }), { headers: { ...auth(), 'accept-encoding': 'gzip, identity;q=0' } });
    expect(zipped.headers.get('content-encoding')).toBe('gzip');
    expect(await zipped.text()).toBe(readFileSync('/proc/version', 'utf8'));
  });

  test('files up to one read (1 MiB) and just over it download exactly, with their length', async () => {
    // Up to 64 KiB a download is one read on the loop and one write; up to 1 MiB one read in the
    // thread pool and one write; above, a stream of reads.
    for (const size of [1, 64 * 1024, 64 * 1024 + 1, MiB - 1, MiB, MiB + 1, 3 * MiB + 5]) {
      const content = randomBytes(size);
      writeFileSync(join(envd.home.user, 'sized.bin'), content);
      const got = await fetch(url('/files', { path: 'sized.bin' }), { headers: { ...auth(), 'accept-encoding': 'identity' } });
      expect(got.status).toBe(200);
      expect(got.headers.get('content-length')).toBe(String(size));
      expect(Buffer.from(await got.arrayBuffer()).equals(content)).toBe(true);
    }
  });

  test('a client that reads slowly gets every byte as it was, over HTTP/1.1 and h2c', async () => {
    // Its socket stays full, so what envd writes waits in Node by reference: a buffer
    // filled again before its bytes had left would send other bytes in their place.
    const content = randomBytes(12 * MiB + 5);
    writeFileSync(join(envd.home.user, 'slow.bin'), content);
    const slowly = (res: Readable, done: (body: Buffer) => void) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        res.pause();
        setTimeout(() => res.resume(), 1);
      });
      res.on('end', () => done(Buffer.concat(chunks)));
    };
    const overHttp1 = await new Promise<Buffer>((resolve, reject) => {
      request(url('/files', { path: 'slow.bin' }), { headers: { ...auth(), 'accept-encoding': 'identity' } }, (res) => slowly(res, resolve))
        .on('error', reject)
        .end();
    });
    expect(overHttp1.equals(content)).toBe(true);
    const session = connect(envd.url);
    try {
      const overH2c = await new Promise<Buffer>((resolve, reject) => {
        const stream = session.request({ ':path': `/files?${new URLSearchParams({ path: 'slow.bin' })}`, ...auth() });
        stream.on('error', reject);
        slowly(stream, resolve);
        stream.end();
      });
      expect(overH2c.equals(content)).toBe(true);
    } finally {
      session.close();
    }
  });

  test('a directory is 400, a missing file 404, a missing path 400, each with a JSON body', async () => {
    mkdirSync(join(envd.home.user, 'a-dir'), { recursive: true });
    const dir = await fetch(url('/files', { path: 'a-dir' }), { headers: auth() });
    expect([dir.status, await dir.json()]).toEqual([400, { code: 400, message: `path '${join(envd.home.user, 'a-dir')}' is a directory` }]);
    const missing = await fetch(url('/files', { path: 'nothing-here' }), { headers: auth() });
    expect([missing.status, await missing.json()]).toEqual([404, { code: 404, message: `path '${join(envd.home.user, 'nothing-here')}' does not exist` }]);
    const noPath = await fetch(url('/files'), { headers: auth() });
    expect([noPath.status, await noPath.json()]).toEqual([400, { code: 400, message: "query parameter 'path' is required" }]);
    const upDir = await post({ path: 'a-dir' }, 'x');
    expect([upDir.status, ((await upDir.json()) as { message: string }).message]).toEqual([400, `path '${join(envd.home.user, 'a-dir')}' is a directory`]);
  });

  test('a FIFO, a device or a socket is 400 both ways, and envd does not wait on the FIFO for a reader or a writer', async () => {
    const fifo = join(envd.home.user, 'a-fifo');
    execFileSync('mkfifo', [fifo]);
    const socketPath = join(envd.home.user, 'a-socket');
    const listener = createServer().listen(socketPath);
    await once(listener, 'listening');
    try {
      for (const path of [fifo, '/dev/null', socketPath]) {
        const message = `path '${path}' is not a regular file`;
        const up = await post({ path }, 'x');
        expect([path, up.status, await up.json()]).toEqual([path, 400, { code: 400, message }]);
        const down = await fetch(url('/files', { path }), { headers: auth() });
        expect([path, down.status, await down.json()]).toEqual([path, 400, { code: 400, message }]);
      }
      // Nothing opened the FIFO's other end, and envd still answers.
      expect((await fetch(`${envd.url}/health`)).status).toBe(204);
    } finally {
      listener.close();
    }
  });

  test('a passwd file that is a FIFO counts as missing: users are unknown (401), and envd does not wait on it', async () => {
    const fifo = join(envd.home.user, 'passwd-fifo');
    execFileSync('mkfifo', [fifo]);
    const other = await startEnvd({ extraArgs: ['--passwd-file', fifo] });
    try {
      const res = await fetch(`${other.url}/files?${new URLSearchParams({ path: 'x', username: 'user' })}`, { headers: { 'x-access-token': other.token! } });
      expect([res.status, await res.json()]).toEqual([401, { code: 401, message: "user 'user' does not exist" }]);
      expect((await fetch(`${other.url}/health`)).status).toBe(204);
    } finally {
      await other.stop();
    }
  });

  test('an unknown user is 401 naming the user', async () => {
    const res = await fetch(url('/files', { path: 'x', username: 'nobody-at-all' }), { headers: auth() });
    expect([res.status, await res.json()]).toEqual([401, { code: 401, message: "user 'nobody-at-all' does not exist" }]);
  });

  test('gzip both ways: a gzip upload is stored plain, a gzip download decodes to it', async () => {
    const content = Buffer.from('compressible '.repeat(10000));
    const up = await post({ path: 'gz.txt' }, gzipSync(content), { 'content-encoding': 'gzip' });
    expect(up.status).toBe(200);
    expect(readFileSync(join(envd.home.user, 'gz.txt')).equals(content)).toBe(true);
    const raw = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      request(url('/files', { path: 'gz.txt' }), { headers: { ...auth(), 'accept-encoding': 'gzip' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      })
        .on('error', reject)
        .end();
    });
    expect(raw.headers['content-encoding']).toBe('gzip');
    expect(raw.body.length).toBeLessThan(content.length / 10);
    expect(gunzipSync(raw.body).equals(content)).toBe(true);
    // Incompressible content is sent as it is, even to a client that accepts gzip.
    writeFileSync(join(envd.home.user, 'random.bin'), randomBytes(256 * 1024));
    const random = await fetch(url('/files', { path: 'random.bin' }), { headers: { ...auth(), 'accept-encoding': 'gzip' } });
    expect(random.headers.get('content-encoding')).toBeNull();
    expect(random.headers.get('content-length')).toBe(String(256 * 1024));
    const bad = await post({ path: 'bad.gz' }, 'not gzip at all', { 'content-encoding': 'gzip' });
    expect([bad.status, ((await bad.json()) as { message: string }).message]).toEqual([400, 'the request body is not valid gzip']);
  });

  test('multipart with several files writes each to its filename path', async () => {
    const form = new FormData();
    form.append('file', new Blob(['first']), 'multi/one.txt');
    form.append('file', new Blob(['second']), join(envd.dir, 'work/multi-abs/two.txt'));
    form.append('file', new Blob([new Uint8Array([0, 1, 2, 255])]), 'multi/deep/three.bin');
    const res = await fetch(url('/files'), { method: 'POST', headers: auth(), body: form });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([
      { name: 'one.txt', path: join(envd.home.user, 'multi/one.txt'), type: 'file' },
      { name: 'two.txt', path: join(envd.dir, 'work/multi-abs/two.txt'), type: 'file' },
      { name: 'three.bin', path: join(envd.home.user, 'multi/deep/three.bin'), type: 'file' },
    ]);
    expect(readFileSync(join(envd.home.user, 'multi/one.txt'), 'utf8')).toBe('first');
    expect(readFileSync(join(envd.dir, 'work/multi-abs/two.txt'), 'utf8')).toBe('second');
    expect([...readFileSync(join(envd.home.user, 'multi/deep/three.bin'))]).toEqual([0, 1, 2, 255]);
  });

  test('multipart with one file and a path writes to the path', async () => {
    const form = new FormData();
    form.append('file', new Blob(['single']), 'ignored-name');
    const res = await fetch(url('/files', { path: 'single.txt' }), { method: 'POST', headers: auth(), body: form });
    expect(await res.json()).toEqual([{ name: 'single.txt', path: join(envd.home.user, 'single.txt'), type: 'file' }]);
  });

  test('a part named file without a filename is the file, its bytes exactly; without a path it is refused naming why', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const body = Buffer.concat([
      Buffer.from('--xyz\r\ncontent-disposition: form-data; name="file"\r\n\r\n'),
      bytes,
      Buffer.from('\r\n--xyz--\r\n'),
    ]);
    const res = await post({ path: 'field.bin' }, body, { 'content-type': 'multipart/form-data; boundary=xyz' });
    expect([res.status, await res.json()]).toEqual([200, [{ name: 'field.bin', path: join(envd.home.user, 'field.bin'), type: 'file' }]]);
    expect(readFileSync(join(envd.home.user, 'field.bin')).equals(bytes)).toBe(true);
    const form = new FormData();
    form.append('file', 'text without a name');
    const nameless = await fetch(url('/files'), { method: 'POST', headers: auth(), body: form });
    expect([nameless.status, ((await nameless.json()) as { message: string }).message]).toEqual([400, "file part 1 has no filename and the request has no 'path'"]);
  });

  test('a malformed multipart body is 400', async () => {
    const res = await post({}, '--xyz\r\ngarbage', { 'content-type': 'multipart/form-data; boundary=xyz' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: number }).code).toBe(400);
  });

  test('X-Metadata headers become file metadata, visible in Stat; too much is 400', async () => {
    const res = await post({ path: 'with-meta.txt' }, 'm', { 'X-Metadata-Owner': 'alice', 'x-metadata-Purpose': 'test run' });
    expect(await res.json()).toEqual([
      { name: 'with-meta.txt', path: join(envd.home.user, 'with-meta.txt'), type: 'file', metadata: { owner: 'alice', purpose: 'test run' } },
    ]);
    expect((await filesystem(envd).stat({ path: 'with-meta.txt' })).entry?.metadata).toEqual({ owner: 'alice', purpose: 'test run' });
    await post({ path: 'with-meta.txt' }, 'm2', { 'X-Metadata-Owner': 'bob' });
    expect((await filesystem(envd).stat({ path: 'with-meta.txt' })).entry?.metadata).toEqual({ owner: 'bob' });
    const big = await post({ path: 'too-much.txt' }, 'x', { 'X-Metadata-Blob': 'v'.repeat(5000) });
    expect([big.status, await big.json()]).toEqual([400, { code: 400, message: 'metadata is 5004 bytes in all; the limit is 4096' }]);
    const longKey = await post({ path: 'too-much.txt' }, 'x', { ['X-Metadata-' + 'k'.repeat(250)]: 'v' });
    expect(longKey.status).toBe(400);
    expect(((await longKey.json()) as { message: string }).message).toMatch(/bytes; the limit is 246/);
  });

  describe('signed URLs', () => {
    const target = () => join(envd.home.user, 'signed.txt');
    beforeAll(() => writeFileSync(target(), 'secret'));
    const get = (query: Record<string, string>) => fetch(url('/files', query));

    test('a valid signature reads without a token; with an expiry too', async () => {
      const p = target();
      const ok = await get({ path: p, signature: fileSignature(p, 'read', '', envd.token!) });
      expect([ok.status, await ok.text()]).toEqual([200, 'secret']);
      const exp = Math.floor(Date.now() / 1000) + 60;
      const withExp = await get({ path: p, signature: fileSignature(p, 'read', '', envd.token!, exp), signature_expiration: String(exp) });
      expect(withExp.status).toBe(200);
      const asUser = await get({ path: p, username: 'user', signature: fileSignature(p, 'read', 'user', envd.token!) });
      expect(asUser.status).toBe(200);
    });

    test('an expired signature is refused', async () => {
      const p = target();
      const exp = Math.floor(Date.now() / 1000) - 10;
      const res = await get({ path: p, signature: fileSignature(p, 'read', '', envd.token!, exp), signature_expiration: String(exp) });
      expect([res.status, await res.json()]).toEqual([401, { code: 401, message: 'signature is already expired' }]);
    });

    test('a forged signature, one for another path, op, user or expiry are refused', async () => {
      const p = target();
      const exp = Math.floor(Date.now() / 1000) + 60;
      const cases: Record<string, string>[] = [
        { path: p, signature: fileSignature(p, 'read', '', 'not-the-token') },
        { path: p, signature: fileSignature(p + 'x', 'read', '', envd.token!) },
        { path: p, signature: fileSignature(p, 'write', '', envd.token!) },
        { path: p, username: 'root', signature: fileSignature(p, 'read', 'user', envd.token!) },
        { path: p, signature: fileSignature(p, 'read', '', envd.token!, exp), signature_expiration: String(exp + 1) },
        { path: p, signature: 'v1_garbage' },
      ];
      for (const query of cases) {
        const res = await get(query);
        expect([res.status, await res.json()]).toEqual([401, { code: 401, message: 'invalid signature' }]);
      }
      expect((await get({ path: p })).status).toBe(401);
    });

    test('a write signature uploads', async () => {
      const p = 'signed-upload.txt';
      const res = await fetch(url('/files', { path: p, signature: fileSignature(p, 'write', '', envd.token!) }), {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: 'uploaded',
      });
      expect(res.status).toBe(200);
      expect(readFileSync(join(envd.home.user, p), 'utf8')).toBe('uploaded');
    });
  });

  test('100 MiB round trip keeps the sha256', async () => {
    const src = randomSource(100 * MiB);
    const up = await post({ path: 'big.bin' }, Readable.toWeb(src.stream) as ReadableStream);
    expect(up.status).toBe(200);
    const expected = src.digest();
    const down = await fetch(url('/files', { path: 'big.bin' }), { headers: { ...auth(), 'accept-encoding': 'identity' } });
    expect(down.headers.get('content-length')).toBe(String(100 * MiB));
    const hash = createHash('sha256');
    await pipeline(Readable.fromWeb(down.body as never), hash);
    expect(hash.digest('hex')).toBe(expected);
    const local = createHash('sha256');
    await pipeline(createReadStream(join(envd.home.user, 'big.bin')), local);
    expect(local.digest('hex')).toBe(expected);
  });

  test('a 1 GiB upload and download do not grow envd by more than 64 MiB', async () => {
    // The peak from here on: earlier tests' transfers must not count.
    resetPeakMemory(envd.pid);
    const before = memoryOf(envd.pid);
    let sent = 0;
    const zeros = new Readable({
      read() {
        this.push(sent++ < 1024 ? Buffer.alloc(MiB) : null);
      },
    });
    const up = await post({ path: 'huge.bin' }, Readable.toWeb(zeros) as ReadableStream);
    expect(up.status).toBe(200);
    expect(statSync(join(envd.home.user, 'huge.bin')).size).toBe(1024 * MiB);
    const down = await fetch(url('/files', { path: 'huge.bin' }), { headers: { ...auth(), 'accept-encoding': 'identity' } });
    let received = 0;
    for await (const chunk of down.body as unknown as AsyncIterable<Uint8Array>) received += chunk.length;
    expect(received).toBe(1024 * MiB);
    const after = memoryOf(envd.pid);
    expect(after.peak - before.rss).toBeLessThan(64 * MiB);
  }, 120_000);
});
