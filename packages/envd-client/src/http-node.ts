// envd's plain HTTP routes (/files, /health, /metrics, /init) over undici,
// Node's own HTTP client: kept connections per origin, a dispatcher of the
// caller's for proxies, bodies decoded with node:zlib as fetch would.
import { Readable, pipeline, type Transform } from 'node:stream';
import { blob, text } from 'node:stream/consumers';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { Agent, request, type Dispatcher } from 'undici';
import { joinBytes } from './bytes.js';
import { EnvdHttpError } from './errors.js';
import type { HttpAnswer, Send } from './http.js';
import { partsLength } from './upload-body.js';

/**
 * Deadlines are the client's (its signal): undici's own would end a slow
 * stream, or a wait with `requestTimeoutMs: 0`, after five minutes.
 */
const AGENT_OPTIONS = { headersTimeout: 0, bodyTimeout: 0 };

let sharedAgent: Agent | undefined;

/** The agent clients share when they have no dispatcher of their own: one pool of connections per origin. */
export function defaultDispatcher(): Dispatcher {
  return (sharedAgent ??= new Agent(AGENT_OPTIONS));
}

/** An agent whose every connection goes to the unix socket at `socketPath`. */
export function socketDispatcher(socketPath: string): Agent {
  return new Agent({ ...AGENT_OPTIONS, connect: { socketPath } });
}

/** Requests over an undici dispatcher. */
export function undiciSender(dispatcher: Dispatcher): Send {
  return async ({ method, url, route, headers, body, signal }) => {
    let payload: Uint8Array | Readable | undefined;
    if (body) {
      const [only] = body.parts ?? [];
      if (body.parts?.length === 1 && ArrayBuffer.isView(only)) {
        payload = only;
      } else {
        // Streamed, with its length declared when it is all in memory.
        if (body.parts) headers = { ...headers, 'content-length': String(partsLength(body.parts)) };
        payload = Readable.from(body.chunks(), { objectMode: false });
      }
    }
    const res = await request(url, { method, headers, body: payload, signal, dispatcher });
    return undiciAnswer(res, method, route);
  };
}

type Decoder = () => Transform;

/** The content codings undone, as fetch undoes them. */
const DECODERS: Record<string, Decoder> = { gzip: createGunzip, 'x-gzip': createGunzip, deflate: createInflate, br: createBrotliDecompress };

function undiciAnswer(res: Dispatcher.ResponseData, method: string, route: string): HttpAnswer {
  const header = (name: string): string | undefined => {
    const value = res.headers[name];
    return Array.isArray(value) ? value.join(', ') : value;
  };
  const coding = header('content-encoding')?.trim().toLowerCase();
  let body: Readable = res.body;
  if (coding && coding !== 'identity' && res.statusCode >= 200 && res.statusCode < 300) {
    const decoder = DECODERS[coding];
    if (!decoder) {
      // Not read: its connection is closed.
      res.body.on('error', () => {}).destroy();
      throw new EnvdHttpError(`${method} ${route} answered ${res.statusCode} with Content-Encoding '${coding}', which this client cannot decode`, {
        kind: 'invalid_response',
        method,
        path: route,
        status: res.statusCode,
      });
    }
    // A failure on either side (the signal's abort among them) destroys both, and reaches the reader through the decoder.
    body = pipeline(res.body, decoder(), () => {});
  }
  return {
    status: res.statusCode,
    statusText: res.statusText ?? '',
    header,
    text: () => text(body),
    bytes: async () => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of body) chunks.push(chunk as Uint8Array);
      return joinBytes(chunks);
    },
    blob: () => blob(body),
    webStream: () => Readable.toWeb(body) as ReadableStream<Uint8Array>,
    nodeStream: () => Promise.resolve(body),
    discard: async () => {
      for await (const _ of body) {
        // dropped
      }
    },
  };
}

/** A Node `Readable` of a fetch body, for `fetchSender` in Node. */
export const nodeStreamOf = (body: ReadableStream<Uint8Array>): Readable => Readable.fromWeb(body as Parameters<typeof Readable.fromWeb>[0]);
