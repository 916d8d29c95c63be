// The one fast path envd keeps of its own: the body of a download sent from
// the file to the socket by the kernel (sendfile(2), native/file_transfer.c)
// rather than read into buffers and written by Node. It stays because,
// measured through the SDK (the bench's files.read rows), large downloads
// through Node's streams took more than twice as long, with several times
// the CPU in envd. It is on unless envd runs with `--sendfile off`; files.ts
// sends a body through Node's streams when it is off or when this path
// cannot take the body. envd's /files tests run both ways.
import { closeSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { native, type TransferHandle } from './native.js';

/** Bodies smaller than this go through Node: the transfer's setup would cost more than it saves. */
const SENDFILE_MIN = 256 * 1024;

/**
 * The descriptor of the socket `req` came on, when the kernel can send a
 * body over it: an HTTP/1 request on a socket with a descriptor. That relies
 * on a Node internal, a net.Socket's `_handle.fd`; where it is not there
 * (HTTP/2, another kind of socket) the body goes through Node.
 */
function socketFd(req: IncomingMessage): number | undefined {
  if (req.httpVersionMajor !== 1) return undefined;
  const fd = (req.socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * Sends the head of `res`, then the first `size` bytes of the file `fd`
 * from the kernel, and ends the response. Node writes nothing to the socket
 * meanwhile: the response's own body is all that would go there, and it
 * goes this way. Gives false when the kernel cannot take this body (the
 * head may have gone, the file is still open, and the caller sends the
 * body itself); else the file is closed.
 */
export async function sendFileInKernel(req: IncomingMessage, res: ServerResponse, fd: number, size: number): Promise<boolean> {
  const sockFd = size >= SENDFILE_MIN ? socketFd(req) : undefined;
  const socket = res.socket;
  if (sockFd === undefined || !socket || socket.destroyed) return false;
  // Settles with how the transfer ended, or with 'not started'.
  const ended = await new Promise<{ code: string | null } | 'not started'>((resolve) => {
    let transfer: TransferHandle | undefined;
    const onClose = (): void => {
      if (transfer) native.cancelTransfer(transfer);
      resolve({ code: 'ECONNRESET' });
    };
    const start = (): void => {
      socket.off('drain', start);
      if (socket.destroyed) {
        socket.off('close', onClose);
        resolve({ code: 'ECONNRESET' });
        return;
      }
      try {
        transfer = native.sendFromFile(sockFd, fd, 0, size, (code) => {
          socket.off('close', onClose);
          resolve({ code });
        });
      } catch {
        socket.off('close', onClose);
        resolve('not started');
      }
    };
    socket.once('close', onClose);
    res.flushHeaders();
    // The body follows the head: it starts once Node has handed the socket all it held.
    if (socket.writableLength > 0) socket.on('drain', start);
    else start();
  });
  if (ended === 'not started') return false;
  closeSync(fd);
  // Cut short since it was opened, or the client went away: the client must
  // see the transfer fail rather than a whole short file.
  if (ended.code === null) res.end();
  else res.destroy();
  return true;
}
