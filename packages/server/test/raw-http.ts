// Bytes on a fresh TCP connection, for requests that an HTTP client would not send.
import { connect } from 'node:net';

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
