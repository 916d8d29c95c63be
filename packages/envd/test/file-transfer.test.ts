// envd's native file transfers (native/file_transfer.c), on real sockets and
// files, without a running daemon.
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { native } from '../src/native.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'envd-transfer-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A unix socket pair: `sender` as a client connects, and `reader`, accepted, which reads nothing until resumed. */
async function unixPair(name: string): Promise<{ sender: Socket; reader: Socket; server: Server }> {
  const server = createServer({ pauseOnConnect: true });
  const path = join(dir, name);
  await new Promise<void>((r) => server.listen(path, () => r()));
  const accepted = new Promise<Socket>((r) => server.once('connection', (s: Socket) => r(s)));
  const sender = connect(path);
  await new Promise<void>((r) => sender.once('connect', () => r()));
  return { sender, reader: await accepted, server };
}

function fdOf(s: Socket): number {
  return (s as unknown as { _handle: { fd: number } })._handle.fd;
}

describe('sendFromFile', () => {
  test('a download is taken whole by a unix socket whose reader has read none of it, as far as net.core.wmem_max lets the send buffer grow', async () => {
    // The transfer raises its socket's send buffer to hold the body. Left at
    // net.core.wmem_default (208 KiB on most hosts), this one would wait for
    // the reader after about that much, and never end here. On a host whose
    // wmem_max is no larger than its wmem_default the body is that small,
    // and the test shows little.
    const length = Math.min(1 << 20, Number(readFileSync('/proc/sys/net/core/wmem_max', 'utf8')));
    const body = randomBytes(length);
    const file = join(dir, 'body.bin');
    writeFileSync(file, body);
    const { sender, reader, server } = await unixPair('send.sock');
    const fd = openSync(file, 'r');
    try {
      const ended = new Promise((resolve) => native.sendFromFile(fdOf(sender), fd, 0, length, (code, moved, side) => resolve({ code, moved, side })));
      // Only a guard against waiting forever for a transfer that stalled; not a measure of speed.
      const stalled = new Promise((resolve) => setTimeout(() => resolve('stalled: the reader was never asked for room'), 10_000).unref());
      expect(await Promise.race([ended, stalled])).toEqual({ code: null, moved: length, side: null });
      const got: Buffer[] = [];
      let have = 0;
      await new Promise<void>((resolve) => {
        reader.on('data', (c: Buffer) => {
          got.push(c);
          if ((have += c.length) === length) resolve();
        });
        reader.resume();
      });
      expect(Buffer.concat(got).equals(body)).toBe(true);
    } finally {
      closeSync(fd);
      sender.destroy();
      reader.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
