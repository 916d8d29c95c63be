// Reading a whole request body held in memory, with a limit: the JSON of
// /init.
import type { IncomingMessage } from 'node:http';

/**
 * The request's body, whole, or `tooLarge()` once more than `limit` bytes
 * arrived; the rest is then read and dropped, so that the error can still
 * be answered on the connection. Read with listeners rather than an async
 * iterator: leaving an iterator early destroys the request, and with it the
 * connection the answer should go out on.
 */
export function readRequestBody(req: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) finish(tooLarge());
      else chunks.push(chunk);
    };
    const onEnd = (): void => finish();
    const onClose = (): void => finish(new Error('the request ended before its body did'));
    const onError = (err: Error): void => finish(err);
    const finish = (err?: Error): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onError);
      if (err) {
        req.resume();
        reject(err);
      } else {
        resolve(Buffer.concat(chunks, size));
      }
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    req.once('error', onError);
  });
}
