// Requests over node:http(s) for the Connect transport (the /files endpoints
// have http1.ts). In Node, fetch (undici) moves a body through web streams and
// promises chunk by chunk; for a 1 MiB download through the sandbox proxy that
// cost 11-13 ms of client CPU, against 2-4 ms for the same GET with node:http.
//
// Both functions fail with the signal's reason once it has fired (so a
// deadline reads as the TimeoutError it is) and otherwise with Node's error.
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface SendOptions {
  method: string;
  headers: Record<string, string>;
  /** The whole body, in one array or several sent in order, with its length; none for a GET. */
  body?: Uint8Array | Uint8Array[];
  signal: AbortSignal;
}

/** Sends a request; resolves with the response once its headers are in. */
export function sendRequest(url: string, { method, headers, body, signal }: SendOptions): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const target = new URL(url);
    const pieces = body === undefined ? [] : Array.isArray(body) ? body : [body];
    if (body !== undefined) headers = { ...headers, 'content-length': String(pieces.reduce((n, p) => n + p.length, 0)) };
    const options: RequestOptions = {
      protocol: target.protocol,
      hostname: target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method,
      headers,
    };
    if (target.username || target.password) options.auth = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
    const req = (target.protocol === 'https:' ? httpsRequest : httpRequest)(options);
    const onAbort = (): void => {
      req.destroy();
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    req.once('response', (res) => {
      signal.removeEventListener('abort', onAbort);
      resolve(res);
    });
    req.once('error', (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(signal.aborted ? signal.reason : err);
    });
    // Corked, the head and every piece leave in one write; the pieces are not copied into one array first.
    req.cork();
    for (const piece of pieces) req.write(piece);
    req.end();
  });
}

/** The whole body of `res`, in one buffer of its own. */
export function readBody(res: IncomingMessage, signal: AbortSignal): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onAbort = (): void => {
      res.destroy();
      reject(signal.reason);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    res.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
    });
    res.once('end', () => {
      signal.removeEventListener('abort', onAbort);
      // Copied into a buffer of its own: a small Buffer.concat result shares Node's pool with unrelated data.
      const bytes = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.length;
      }
      resolve(bytes);
    });
    res.once('error', (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(signal.aborted ? signal.reason : err);
    });
    // A response cut short ends without 'end' or 'error' on some Node versions.
    res.once('close', () => {
      if (!res.complete) reject(signal.aborted ? signal.reason : cutShort());
    });
  });
}

function cutShort(): Error {
  return Object.assign(new Error('the connection closed before the body ended'), { code: 'ECONNRESET' });
}

/** The headers of a node:http answer as a fetch Headers, repeated ones kept. */
export function headersOf(res: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  return headers;
}
