// Node's HTTP/1 server reads each request through a parser of its own
// (llhttp) attached to the connection. When envd takes a request body off
// the socket itself (files.ts moves large uploads socket -> file in the
// kernel), that parser still expects the body, and would read the next
// request's head as body. skipBodyInParser tells it the body went by.
import type { IncomingMessage } from 'node:http';

/** The parts of Node's per-connection parser (`socket.parser`) used here. */
interface NodeHttpParser {
  execute(data: Uint8Array): number | Error;
  [slot: string]: unknown;
}

/** Zeros stand in for the body's bytes: the parser counts them and does not look at them. */
const STAND_IN = Buffer.alloc(1024 * 1024);

/**
 * Moves the parser of `req`'s connection past `length` bytes of body that
 * it has not read, to the end of the request, so that the connection can
 * serve the next one. The parser's body callback is taken off meanwhile:
 * with it, Node would copy every piece into a new buffer for the request
 * stream. Call it only when exactly `length` bytes of the body are all
 * that is left unread by Node, and the body has left the socket.
 *
 * This relies on Node internals: `socket.parser`, its `execute`, and the
 * body callback Node sets on it (a function named parserOnBody, under an
 * index slot). Returns false without touching the parser when they are not
 * there, and false when the parser did not take the bytes as the rest of
 * the body; the connection must then be closed.
 */
export function skipBodyInParser(req: IncomingMessage, length: number): boolean {
  const parser = (req.socket as unknown as { parser?: NodeHttpParser | null }).parser;
  if (!parser || typeof parser.execute !== 'function' || !Number.isSafeInteger(length) || length < 0) return false;
  const slot = Object.keys(parser).find((key) => typeof parser[key] === 'function' && (parser[key] as () => void).name === 'parserOnBody');
  if (slot === undefined) return false;
  const onBody = parser[slot];
  parser[slot] = undefined;
  try {
    for (let left = length; left > 0; ) {
      const n = Math.min(left, STAND_IN.length);
      if (parser.execute(STAND_IN.subarray(0, n)) !== n) return false;
      left -= n;
    }
  } catch {
    return false;
  } finally {
    parser[slot] = onBody;
  }
  return req.complete;
}
