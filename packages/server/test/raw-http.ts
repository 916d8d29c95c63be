// Bytes on a fresh TCP connection, for requests that an HTTP client would not send.
import { connect, type Socket } from 'node:net';

/** Sends `bytes` to `port` and reads until `done(text)` says so or the connection closes. */
export function rawExchange(port: number, bytes: string | Buffer, done: (text: string) => boolean = () => false): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let text = '';
    sock.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (done(text)) {
        sock.destroy();
        resolve({ text, closed: false });
      }
    });
    sock.on('error', reject);
    sock.on('close', () => resolve({ text, closed: true }));
    sock.write(bytes);
  });
}

export interface UntilClosedOptions {
  /** The client's address (127.0.0.1); another loopback address is another client. */
  localAddress?: string;
  /** Writes `bytes` one at a time, this long apart, instead of at once. */
  dripMs?: number;
  /** Fails if the connection is still open after this long (10 s). */
  guardMs?: number;
}

/**
 * Opens a connection to `port` on 127.0.0.1, writes `bytes`, and never
 * closes it: resolves with what came back once the server has closed it. The
 * guard is only there not to wait forever, and says nothing of speed.
 */
export function untilClosed(port: number, bytes: string | Buffer = '', options: UntilClosedOptions = {}): Promise<string> {
  const guardMs = options.guardMs ?? 10_000;
  const all = Buffer.from(bytes);
  return new Promise((resolve, reject) => {
    const sock = connect({ port, host: '127.0.0.1', localAddress: options.localAddress });
    let text = '';
    let sent = 0;
    const drip =
      options.dripMs === undefined
        ? undefined
        : setInterval(() => {
            if (sent < all.length && !sock.destroyed) sock.write(all.subarray(sent, ++sent));
          }, options.dripMs);
    const guard = setTimeout(() => {
      sock.destroy();
      reject(new Error(`the server had not closed the connection after ${guardMs} ms; it sent ${JSON.stringify(text)}`));
    }, guardMs);
    sock.on('data', (d: Buffer) => (text += d.toString('latin1')));
    // A server that drops a connection it will not serve may reset it.
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(guard);
      clearInterval(drip);
      resolve(text);
    });
    if (drip === undefined && all.length) sock.write(all);
  });
}

/**
 * A connection from `localAddress` that has sent `request` and had an answer
 * that `answered` accepts; kept open. Rejects if it closes first.
 */
export function answeredConnection(port: number, request: string, answered: (text: string) => boolean, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const sock = connect({ port, host: '127.0.0.1', localAddress });
    let text = '';
    const closed = () => reject(new Error(`closed after ${JSON.stringify(text)}`));
    sock.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (answered(text)) {
        sock.off('close', closed);
        resolve(sock);
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', closed);
    sock.write(request);
  });
}
