import { addAbortSignal, type Readable } from 'node:stream';
import type { Client, Interceptor, Transport } from '@connectrpc/connect';
import { Filesystem, Process, type envd } from '@paddock/models';
import { EnvdArgumentError, EnvdHttpError, errorFromFailure, errorFromResponse } from './errors.js';
import { connectionHeaders, envdInterceptor, type EnvdHeaderConfig } from './headers.js';
import { metadataHeaders } from './metadata.js';
import { joinBytes } from './bytes.js';
import * as http1 from './http1.js';
import { createNodeTransport } from './node-transport.js';
import { createServiceClient } from './service-client.js';
import { endpointUrl, fileUrl, filesQuery } from './signature.js';
import { builtinFetchSlicesBytes, isInMemory, multipartBody, newBoundary, octetStreamBody, type RequestBody, type UploadData } from './upload-body.js';

export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** A file written by an upload, as envd reports it. */
export type EntryInfo = envd.components['schemas']['EntryInfo'];
/** One sample of resource usage inside the sandbox. */
export type Metrics = envd.components['schemas']['Metrics'];

export type FetchFunction = (input: string, init?: RequestInit) => Promise<Response>;

/** What the client hands a transport factory; connect-web's and connect-node's `createConnectTransport` accept it. */
export interface TransportOptions {
  baseUrl: string;
  useBinaryFormat: boolean;
  /** Adds envd's headers; a custom transport must keep it. */
  interceptors: Interceptor[];
}

export interface EnvdClientOptions extends EnvdHeaderConfig {
  /**
   * Base URL of envd: a sandbox's own (`https://49983-{sandboxID}.{domain}`)
   * or a shared sandbox URL together with `sandboxId`. A path prefix is kept.
   */
  envdUrl: string;
  /** Connect binary format instead of JSON (the default, as the e2b SDK uses). */
  useBinaryFormat?: boolean;
  /**
   * Builds the Connect transport, e.g. connect-web's `createConnectTransport`
   * in a browser. Default: `createNodeTransport`, Connect over HTTP/1.1 (http1.ts).
   */
  createTransport?: (options: TransportOptions) => Transport;
  /**
   * fetch for the HTTP endpoints (`/files`, `/health`, `/metrics`). Default: the global one, except that
   * downloads and uploads of bytes in memory go over the package's own HTTP/1.1 client (http1.ts).
   */
  fetch?: FetchFunction;
  /**
   * Deadline of an HTTP call; 0 for none. Default 60 000. A download in a
   * stream format is bounded until its headers arrive; an upload only when
   * all its data is in memory, since a stream can take any time.
   */
  requestTimeoutMs?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs`. */
  requestTimeoutMs?: number;
}

export interface DownloadOptions extends CallOptions {
  /** User whose view of the filesystem to read (relative paths resolve in their home); envd's default user when omitted. */
  user?: string;
  /** Ask for a gzip-compressed body (`Accept-Encoding: gzip`, else `identity`); it is decompressed transparently. */
  gzip?: boolean;
}

/** What `download` returns: `text` (default), `bytes`, `blob`, a Web `stream` or a Node `node-stream`. */
export type DownloadFormat = 'text' | 'bytes' | 'blob' | 'stream' | 'node-stream';

export interface UploadEntry {
  /** Target path; relative paths resolve in the user's home. */
  path: string;
  data: UploadData;
}

export interface UploadOptions extends CallOptions {
  /** User who owns the written files; envd's default user when omitted. */
  user?: string;
  /**
   * `multipart` (default): one `multipart/form-data` request for all files.
   * `octet-stream`: one raw request per file, sent side by side.
   */
  encoding?: 'multipart' | 'octet-stream';
  /** Compress each body on the fly (`Content-Encoding: gzip`); implies `octet-stream`. */
  gzip?: boolean;
  /** Sent as `X-Metadata-{key}` headers; checked here as envd would check them. */
  metadata?: Record<string, string>;
}

export interface FileUrlRequest {
  /** User as whom to read or write; signed and sent as `username`. */
  user?: string;
  /** Seconds from now until the URL stops working; needs an access token. */
  expiresInSeconds?: number;
}

function defaultTransport(options: TransportOptions): Transport {
  return createNodeTransport(options);
}

/**
 * Client of one sandbox's envd. `filesystem` and `process` are Connect
 * clients of envd's services (their errors are `ConnectError`s); the other
 * methods use envd's HTTP endpoints and throw `EnvdHttpError` or
 * `EnvdArgumentError`.
 */
export class EnvdClient {
  readonly transport: Transport;
  readonly filesystem: Client<typeof Filesystem>;
  readonly process: Client<typeof Process>;
  readonly #envdUrl: string;
  readonly #accessToken: string | undefined;
  readonly #user: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetch: FetchFunction;
  /** Transfer files over http1.ts rather than fetch: when no fetch of the caller's own was given. */
  readonly #ownHttp: boolean;
  /** Send large in-memory uploads as slices: only through the built-in fetch, known to take a stream body. */
  readonly #sliceBytes: boolean;
  readonly #timeoutMs: number;

  constructor(options: EnvdClientOptions) {
    this.#envdUrl = options.envdUrl;
    this.#accessToken = options.accessToken;
    this.#user = options.user;
    this.#headers = connectionHeaders(options);
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#sliceBytes = options.fetch === undefined && builtinFetchSlicesBytes;
    this.#ownHttp = options.fetch === undefined && /^https?:/i.test(options.envdUrl);
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.transport = (options.createTransport ?? defaultTransport)({
      baseUrl: options.envdUrl,
      useBinaryFormat: options.useBinaryFormat ?? false,
      interceptors: [envdInterceptor(options)],
    });
    this.filesystem = createServiceClient(Filesystem, this.transport);
    this.process = createServiceClient(Process, this.transport);
  }

  /** `GET /files`: the file at `path`. An empty file gives an empty result. */
  download(path: string, options?: DownloadOptions & { format?: 'text' }): Promise<string>;
  download(path: string, options: DownloadOptions & { format: 'bytes' }): Promise<Uint8Array>;
  download(path: string, options: DownloadOptions & { format: 'blob' }): Promise<Blob>;
  download(path: string, options: DownloadOptions & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  download(path: string, options: DownloadOptions & { format: 'node-stream' }): Promise<Readable>;
  download(
    path: string,
    options: DownloadOptions & { format: DownloadFormat },
  ): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array> | Readable>;
  async download(
    path: string,
    options: DownloadOptions & { format?: DownloadFormat } = {},
  ): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array> | Readable> {
    const format = options.format ?? 'text';
    const url = endpointUrl(this.#envdUrl, '/files', filesQuery(path, options.user ?? this.#user));
    const headers: Record<string, string> = { ...this.#headers };
    // Without gzip asked for, say so: fetch would offer gzip on its own, and
    // envd then spends a compression trial on every file (and compresses
    // what compresses), which on a fast link only slows the download down.
    headers['Accept-Encoding'] = options.gzip ? 'gzip' : 'identity';
    const call = startCall(options.signal, options.requestTimeoutMs ?? this.#timeoutMs);
    try {
      if (this.#ownHttp) return await this.#downloadOverHttp1(url, headers, format, call);
      const response = await this.#fetch(url, { headers, signal: call.signal });
      if (!response.ok) throw await errorFromResponse('GET', '/files', response);
      const body = response.headers.get('content-length') === '0' || response.body === null ? emptyStream() : response.body;
      switch (format) {
        case 'stream':
          call.stopTimer();
          return body;
        case 'node-stream': {
          call.stopTimer();
          const { Readable } = await import('node:stream');
          return Readable.fromWeb(body as Parameters<typeof Readable.fromWeb>[0]);
        }
        case 'bytes':
          return new Uint8Array(await new Response(body).arrayBuffer());
        case 'blob':
          return await new Response(body).blob();
        default:
          return await new Response(body).text();
      }
    } catch (err) {
      throw errorFromFailure('GET', '/files', err, call.callerAborted());
    } finally {
      if (format !== 'stream' && format !== 'node-stream') call.stopTimer();
    }
  }

  /**
   * `download` over the client's own HTTP/1.1 (http1.ts): the body as the
   * socket reads it. Formats and errors are the fetch path's, and a gzip body
   * is decompressed as fetch would.
   */
  async #downloadOverHttp1(
    url: string,
    headers: Record<string, string>,
    format: DownloadFormat,
    call: Call,
  ): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array> | Readable> {
    const res = await http1.request(url, { method: 'GET', headers, signal: call.signal, idempotent: true });
    if (res.status < 200 || res.status > 299) throw await errorFromResponse('GET', '/files', await responseOf(res, call.signal));
    const coding = contentCoding(res);
    if (coding !== undefined) return await decodedBody(res, coding, format, call);
    switch (format) {
      case 'stream':
        call.stopTimer();
        return http1.webStreamOf(res, call.signal);
      case 'node-stream':
        call.stopTimer();
        // The caller's signal still ends the stream, as it ends fetch's body.
        return addAbortSignal(call.signal, http1.nodeStreamOf(res));
      default: {
        const bytes = await http1.bytesOf(res, call.signal);
        if (format === 'bytes') return bytes;
        if (format === 'blob') return new Blob([bytes]);
        return new TextDecoder().decode(bytes);
      }
    }
  }

  /**
   * `POST /files`: writes one file, or several. Resolves to envd's report of
   * what it wrote. Nothing is buffered whole: stream data is sent as it is read.
   */
  upload(path: string, data: UploadData, options?: UploadOptions): Promise<EntryInfo[]>;
  upload(files: UploadEntry[], options?: UploadOptions): Promise<EntryInfo[]>;
  async upload(
    pathOrFiles: string | UploadEntry[],
    dataOrOptions?: UploadData | UploadOptions,
    maybeOptions?: UploadOptions,
  ): Promise<EntryInfo[]> {
    const single = typeof pathOrFiles === 'string';
    const files = single ? [{ path: pathOrFiles, data: dataOrOptions as UploadData }] : pathOrFiles;
    const options = (single ? maybeOptions : (dataOrOptions as UploadOptions | undefined)) ?? {};
    const gzip = options.gzip ?? false;
    const encoding = options.encoding ?? (gzip ? 'octet-stream' : 'multipart');
    if (files.length === 0) throw new EnvdArgumentError('files', 'nothing to upload: the list of files is empty');
    if (gzip && encoding === 'multipart') {
      throw new EnvdArgumentError('gzip', 'gzip needs encoding "octet-stream": multipart bodies are sent uncompressed');
    }
    const headers = { ...this.#headers, ...metadataHeaders(options.metadata) };
    const user = options.user ?? this.#user;
    // Reading a stream can take any time, so only in-memory data is bounded by the request timeout.
    const timeoutMs = files.every((f) => isInMemory(f.data)) ? (options.requestTimeoutMs ?? this.#timeoutMs) : 0;

    if (encoding === 'multipart') {
      const boundary = newBoundary();
      headers['Content-Type'] = `multipart/form-data; boundary=${boundary}`;
      // `path` names the target only of a lone file; with several, each part's filename does.
      const target = files.length === 1 ? files[0]?.path : undefined;
      return this.#post(target, user, multipartBody(files, boundary, this.#sliceBytes), headers, options.signal, timeoutMs);
    }

    headers['Content-Type'] = 'application/octet-stream';
    if (gzip) headers['Content-Encoding'] = 'gzip';
    for (const f of files) {
      if (!f.path) throw new EnvdArgumentError('path', 'an octet-stream upload needs a target path for every file');
    }
    if (files.length === 1) {
      const [f] = files as [UploadEntry];
      return await this.#post(f.path, user, octetStreamBody(f.data, gzip, this.#sliceBytes), headers, options.signal, timeoutMs);
    }
    // One request per file, side by side; the first failure cancels the rest.
    const siblings = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, siblings.signal]) : siblings.signal;
    const results = await Promise.all(
      files.map((f) =>
        this.#post(f.path, user, octetStreamBody(f.data, gzip, this.#sliceBytes), headers, signal, timeoutMs).catch((err: unknown) => {
          siblings.abort(err);
          throw err;
        }),
      ),
    );
    return results.flat();
  }

  /** URL to download `path` with no headers (a link, `curl`); signed when the client has an access token. */
  downloadUrl(path: string, options: FileUrlRequest = {}): Promise<string> {
    return this.#fileUrl('read', path, options);
  }

  /** URL to upload to with no headers (an HTML form, `curl -F`); signed when the client has an access token. */
  uploadUrl(path?: string, options: FileUrlRequest = {}): Promise<string> {
    return this.#fileUrl('write', path, options);
  }

  /** `GET /health`: true when envd answers 2xx, false on 502 (through the proxy: the sandbox is not running). */
  health(options: CallOptions = {}): Promise<boolean> {
    return this.#get('/health', options, async (response) => {
      if (response.ok) return true;
      if (response.status === 502) {
        await response.body?.cancel();
        return false;
      }
      throw await errorFromResponse('GET', '/health', response);
    });
  }

  /** `GET /metrics`: current CPU, memory and disk usage. */
  metrics(options: CallOptions = {}): Promise<Metrics> {
    return this.#get('/metrics', options, async (response) => {
      if (!response.ok) throw await errorFromResponse('GET', '/metrics', response);
      const body: unknown = await response.json().catch((err: unknown) => {
        throw invalidResponse('GET', '/metrics', response.status, 'a body that is not JSON', err);
      });
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw invalidResponse('GET', '/metrics', response.status, 'a body that is not a metrics object');
      }
      return body as Metrics;
    });
  }

  /** A GET whose answer, body included, is read within the deadline. */
  async #get<T>(path: string, options: CallOptions, read: (response: Response) => Promise<T>): Promise<T> {
    const call = startCall(options.signal, options.requestTimeoutMs ?? this.#timeoutMs);
    try {
      const response = await this.#fetch(endpointUrl(this.#envdUrl, path), { headers: this.#headers, signal: call.signal });
      return await read(response);
    } catch (err) {
      throw errorFromFailure('GET', path, err, call.callerAborted());
    } finally {
      call.stopTimer();
    }
  }

  async #post(
    path: string | undefined,
    user: string | undefined,
    requestBody: RequestBody,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    timeoutMs: number,
  ): Promise<EntryInfo[]> {
    const url = endpointUrl(this.#envdUrl, '/files', filesQuery(path, user));
    const call = startCall(signal, timeoutMs);
    const { streaming, length, pieces } = requestBody;
    try {
      if (this.#ownHttp && pieces) {
        // Bytes in memory: straight to the socket, and the short JSON answer read from it as it is.
        // Idempotent: the same bytes to the same paths.
        const res = await http1.request(url, { method: 'POST', headers, body: pieces, signal: call.signal, idempotent: true });
        if (res.status < 200 || res.status > 299) throw await errorFromResponse('POST', '/files', await responseOf(res, call.signal));
        const bytes = await http1.bytesOf(res, call.signal);
        return await writtenEntries(res.status, () => JSON.parse(new TextDecoder().decode(bytes)) as unknown);
      }
      if (length !== undefined) headers = { ...headers, 'Content-Length': String(length) };
      const init: RequestInit = { method: 'POST', headers, body: requestBody.body, signal: call.signal };
      if (streaming) init.duplex = 'half';
      const response = await this.#fetch(url, init);
      if (!response.ok) throw await errorFromResponse('POST', '/files', response);
      return await writtenEntries(response.status, () => response.json());
    } catch (err) {
      throw errorFromFailure('POST', '/files', err, call.callerAborted());
    } finally {
      call.stopTimer();
    }
  }

  #fileUrl(operation: 'read' | 'write', path: string | undefined, options: FileUrlRequest): Promise<string> {
    return fileUrl({
      envdUrl: this.#envdUrl,
      path,
      operation,
      user: options.user ?? this.#user,
      accessToken: this.#accessToken,
      expiresInSeconds: options.expiresInSeconds,
    });
  }
}

interface Call {
  signal: AbortSignal;
  /** Ends the deadline (the call finished, or what remains is a stream the caller reads at their pace). */
  stopTimer(): void;
  callerAborted(): boolean;
}

/** The signal of one HTTP call: the caller's signal and a deadline that can be lifted. */
function startCall(callerSignal: AbortSignal | undefined, timeoutMs: number): Call {
  const deadline = new AbortController();
  const timer =
    timeoutMs > 0
      ? setTimeout(() => deadline.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')), timeoutMs)
      : undefined;
  return {
    signal: callerSignal ? AbortSignal.any([callerSignal, deadline.signal]) : deadline.signal,
    stopTimer: () => clearTimeout(timer),
    callerAborted: () => callerSignal?.aborted ?? false,
  };
}

/** The list of written files that a `POST /files` answered with; `read` gives its body as JSON. */
async function writtenEntries(status: number, read: () => unknown): Promise<EntryInfo[]> {
  let entries: unknown;
  try {
    entries = await read();
  } catch (err) {
    throw invalidResponse('POST', '/files', status, 'a body that is not JSON', err);
  }
  if (!Array.isArray(entries)) throw invalidResponse('POST', '/files', status, 'no list of written files');
  return entries as EntryInfo[];
}

/** An answer of http1.ts, body read whole, as a fetch Response: for errors, which are read from a Response. */
async function responseOf(res: http1.Http1Response, signal: AbortSignal): Promise<Response> {
  const body = await http1.bytesOf(res, signal);
  // A Response cannot carry a body with 204/304; envd sends none with them anyway.
  return new Response(res.status === 204 || res.status === 304 ? null : body, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
}

type Coding = 'gzip' | 'deflate' | 'br';

/** The Content-Encoding of an answer when there is one to undo; fetch undoes the same three. */
function contentCoding(res: http1.Http1Response): Coding | undefined {
  const value = res.header('content-encoding')?.trim().toLowerCase();
  if (value === undefined || value === '' || value === 'identity') return undefined;
  if (value === 'gzip' || value === 'x-gzip') return 'gzip';
  if (value === 'deflate' || value === 'br') return value;
  http1.dropBody(res);
  throw invalidResponse('GET', '/files', res.status, `Content-Encoding '${value}', which this client cannot decode`);
}

/** A compressed body, decompressed, in the format asked for. */
async function decodedBody(
  res: http1.Http1Response,
  coding: Coding,
  format: DownloadFormat,
  call: Call,
): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array> | Readable> {
  const [zlib, { pipeline, Readable }] = await Promise.all([import('node:zlib'), import('node:stream')]);
  const decoder = coding === 'gzip' ? zlib.createGunzip() : coding === 'deflate' ? zlib.createInflate() : zlib.createBrotliDecompress();
  // A failure on either side destroys both, and reaches the reader through `decoder`.
  pipeline(http1.nodeStreamOf(res), decoder, () => {});
  const body = addAbortSignal(call.signal, decoder);
  if (format === 'node-stream' || format === 'stream') {
    call.stopTimer();
    return format === 'stream' ? (Readable.toWeb(body) as ReadableStream<Uint8Array>) : body;
  }
  const pieces: Uint8Array[] = [];
  try {
    for await (const piece of body) pieces.push(piece as Uint8Array);
  } catch (err) {
    throw call.signal.aborted ? call.signal.reason : err;
  }
  const bytes = joinBytes(pieces);
  if (format === 'bytes') return bytes;
  if (format === 'blob') return new Blob([bytes]);
  return new TextDecoder().decode(bytes);
}

function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
}

function invalidResponse(method: string, path: string, status: number, what: string, cause?: unknown): EnvdHttpError {
  return new EnvdHttpError(`${method} ${path} answered ${status} with ${what}`, {
    kind: 'invalid_response',
    method,
    path,
    status,
    cause,
  });
}
