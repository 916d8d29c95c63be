// envd's plain HTTP routes (/files, /health, /metrics, /init) go over a
// fetch (the platform's or the caller's) or, in Node, over undici
// (http-node.ts). Both give an `HttpAnswer`, so the client reads either alike.
// Nothing here needs Node: this module is part of the browser build.
import { pullStream, type RequestBody } from './upload-body.js';

/** A `fetch` that takes the URL as a string. */
export type FetchFunction = (input: string, init?: RequestInit) => Promise<Response>;

export interface HttpRequest {
  method: 'GET' | 'POST';
  url: string;
  /** The route, for messages (`/files`), without the query. */
  route: string;
  headers: Record<string, string>;
  body?: RequestBody;
  /** Fails the request, and a body being read, with its reason. */
  signal: AbortSignal;
}

/** An answer whose head is in; its body is read once, in one of the forms below, decompressed. */
export interface HttpAnswer {
  readonly status: number;
  readonly statusText: string;
  header(name: string): string | undefined;
  text(): Promise<string>;
  bytes(): Promise<Uint8Array>;
  blob(): Promise<Blob>;
  webStream(): ReadableStream<Uint8Array>;
  /**
   * A Node `Readable` of the body; absent where there is no Node (a
   * browser). Typed loosely so that this module's declarations need no Node
   * types: the Node build's client gives the type back.
   */
  nodeStream?(): Promise<unknown>;
  /** Reads and drops the body (so that its connection can be used again). */
  discard(): Promise<void>;
}

export type Send = (req: HttpRequest) => Promise<HttpAnswer>;

/**
 * Requests through `fetch`, the caller's or the platform's. `toNodeStream`,
 * given in Node, lets a download be read as a Node `Readable`.
 */
export function fetchSender(fetchFn: FetchFunction, toNodeStream?: (body: ReadableStream<Uint8Array>) => unknown): Send {
  return async ({ method, url, headers, body, signal }) => {
    const init: RequestInit = { method, headers, signal };
    if (body?.parts) {
      // In memory: bytes alone as they are, else a Blob, which browsers send with its length.
      const [only] = body.parts;
      init.body = body.parts.length === 1 && ArrayBuffer.isView(only) ? only : new Blob(body.parts);
    } else if (body) {
      init.body = pullStream(body.chunks());
      init.duplex = 'half';
    }
    return fetchAnswer(await fetchFn(url, init), toNodeStream);
  };
}

function fetchAnswer(response: Response, toNodeStream: ((body: ReadableStream<Uint8Array>) => unknown) | undefined): HttpAnswer {
  const body = (): ReadableStream<Uint8Array> =>
    response.body ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
  return {
    status: response.status,
    statusText: response.statusText,
    header: (name) => response.headers.get(name) ?? undefined,
    text: () => response.text(),
    bytes: async () => new Uint8Array(await response.arrayBuffer()),
    blob: () => response.blob(),
    webStream: body,
    nodeStream: toNodeStream && (() => Promise.resolve(toNodeStream(body()))),
    discard: async () => {
      await response.body?.cancel();
    },
  };
}
