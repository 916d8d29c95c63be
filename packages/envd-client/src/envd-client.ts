import { createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport as createWebTransport } from '@connectrpc/connect-web';
import { Filesystem, Process, type envd } from '@paddock/models';
import { EnvdArgumentError, EnvdHttpError, errorFromFailure, errorFromResponse } from './errors.js';
import { connectionHeaders, envdInterceptor, type EnvdHeaderConfig } from './headers.js';
import { fetchSender, type FetchFunction, type HttpAnswer, type Send } from './http.js';
import { metadataHeaders } from './metadata.js';
import { endpointUrl, fileUrl, filesQuery } from './signature.js';
import { bytesBody, isInMemory, multipartBody, newBoundary, octetStreamBody, type RequestBody, type UploadData } from './upload-body.js';

export type { FetchFunction };

/** Deadline of an HTTP call when `requestTimeoutMs` is not given, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** A file written by an upload, as envd reports it. */
export type EntryInfo = envd.components['schemas']['EntryInfo'];
/** One sample of resource usage inside the sandbox. */
export type Metrics = envd.components['schemas']['Metrics'];
/** What `POST /init` takes: every field optional, only those sent are applied. */
export type InitRequest = NonNullable<envd.operations['postInit']['requestBody']>['content']['application/json'];
/** The body of `POST /streams/end`. */
export type StreamsEndRequest = envd.operations['postStreamsEnd']['requestBody']['content']['application/json'];

/** What the client hands a transport factory; connect-web's and connect-node's `createConnectTransport` accept it. */
export interface TransportOptions {
  /** Base URL of envd, as `envdUrl` gives it. */
  baseUrl: string;
  /** Connect binary format (true) or JSON (false). */
  useBinaryFormat: boolean;
  /** Adds envd's headers; a custom transport must keep it. */
  interceptors: Interceptor[];
}

/** Options of `new EnvdClient`. */
export interface EnvdClientOptions extends EnvdHeaderConfig {
  /**
   * Base URL of envd: a sandbox's own (`https://49983-{sandboxID}.{domain}`)
   * or a shared sandbox URL together with `sandboxId`. A path prefix is kept.
   */
  envdUrl: string;
  /** Connect binary format instead of JSON (the default, as the e2b SDK uses). */
  useBinaryFormat?: boolean;
  /** HTTP version of the default Connect transport in Node: `1.1` (the default) or `2`. */
  httpVersion?: '1.1' | '2';
  /**
   * Builds the Connect transport. Default: `createNodeTransport`
   * (connect-node) in Node, connect-web's over `fetch` in a browser.
   */
  createTransport?: (options: TransportOptions) => Transport;
  /**
   * fetch for the HTTP routes (`/files`, `/health`, `/metrics`, `/init`), and
   * in a browser for the Connect calls too. Default: undici, through
   * `dispatcher`, in Node; the global fetch in a browser.
   */
  fetch?: FetchFunction;
  /**
   * Node: a unix socket that envd listens on, to connect to instead of the URL's
   * host (the host's own link to a sandbox); `envdUrl` still gives the path
   * and the Host header. The client then owns its connections: `close()` them.
   */
  socketPath?: string;
  /**
   * Deadline of an HTTP call; 0 for none. Default 60 000. A download in a
   * stream format is bounded until its headers arrive; an upload only when
   * all its data is in memory, since a stream can take any time.
   */
  requestTimeoutMs?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** Cancels the call. */
  signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs`. */
  requestTimeoutMs?: number;
}

/** Options of `download`. */
export interface DownloadOptions extends CallOptions {
  /** User whose view of the filesystem to read (relative paths resolve in their home); envd's default user when omitted. */
  user?: string;
  /** Ask for a gzip-compressed body (`Accept-Encoding: gzip`, else `identity`); it is decompressed transparently. */
  gzip?: boolean;
}

/** What `download` returns: `text` (default), `bytes`, `blob`, a Web `stream` or (the Node build only) a Node `node-stream`. */
export type DownloadFormat = 'text' | 'bytes' | 'blob' | 'stream' | 'node-stream';

/** The formats of `download` that every build has. */
export type WebDownloadFormat = Exclude<DownloadFormat, 'node-stream'>;

/** One of several files to `upload`. */
export interface UploadEntry {
  /** Target path; relative paths resolve in the user's home. */
  path: string;
  /** Contents of the file. */
  data: UploadData;
}

/** Options of `upload`. */
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

/** Options of `uploadUrl` and `downloadUrl`. */
export interface FileUrlRequest {
  /** User as whom to read or write; signed and sent as `username`. */
  user?: string;
  /** Seconds from now until the URL stops working; needs an access token. */
  expiresInSeconds?: number;
}

/**
 * What `connect` gives a client: its HTTP sender, its Connect transport, and
 * the connections it owns (which `close()` closes). Internal: it passes between
 * the package's two builds.
 *
 * @internal
 */
export interface EnvdLink {
  /** Sends the HTTP calls. */
  send: Send;
  /** Carries the Connect calls. */
  transport: Transport;
  /** Connections of this client's own, closed by `close()`. */
  owned: { close(): Promise<void> }[];
}

/**
 * Client of one sandbox's envd. `filesystem` and `process` are Connect
 * clients of envd's services (their errors are `ConnectError`s); the other
 * methods use envd's HTTP routes and throw `EnvdHttpError` or
 * `EnvdArgumentError`.
 */
export class EnvdClient {
  /** Connect transport of the `filesystem` and `process` clients. */
  readonly transport: Transport;
  /** Connect client of envd's filesystem service. */
  readonly filesystem: Client<typeof Filesystem>;
  /** Connect client of envd's process service. */
  readonly process: Client<typeof Process>;
  readonly #envdUrl: string;
  readonly #accessToken: string | undefined;
  readonly #user: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #send: Send;
  /** What `close()` closes: the client's own connections, when it has any. */
  readonly #owned: { close(): Promise<void> }[] = [];
  readonly #timeoutMs: number;

  constructor(options: EnvdClientOptions) {
    const url = new URL(options.envdUrl);
    if (url.username || url.password) {
      throw new EnvdArgumentError('envdUrl', 'credentials in envdUrl are not sent: give the access token as accessToken, other credentials in headers');
    }
    this.#envdUrl = options.envdUrl;
    this.#accessToken = options.accessToken;
    this.#user = options.user;
    this.#headers = connectionHeaders(options);
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const transportOptions = { baseUrl: options.envdUrl, useBinaryFormat: options.useBinaryFormat ?? false, interceptors: [envdInterceptor(options)] };
    const link = this.connect(options, transportOptions);
    this.#send = link.send;
    this.transport = link.transport;
    this.#owned.push(...link.owned);
    this.filesystem = createClient(Filesystem, this.transport);
    this.process = createClient(Process, this.transport);
  }

  /**
   * How this client reaches envd. This build (the browser's) uses fetch and
   * connect-web; the Node build's client overrides it with undici and
   * connect-node. Called once, from the constructor.
   *
   * @internal
   */
  protected connect(options: EnvdClientOptions, transportOptions: TransportOptions): EnvdLink {
    for (const name of ['socketPath', 'dispatcher'] as const) {
      if ((options as unknown as Record<string, unknown>)[name] !== undefined) throw new EnvdArgumentError(name, `${name} needs Node; this is the browser build of @paddock/envd-client`);
    }
    if (options.httpVersion === '2') {
      throw new EnvdArgumentError('httpVersion', "httpVersion '2' needs Node; in a browser, fetch picks the HTTP version");
    }
    const fetchFn: FetchFunction = options.fetch ?? ((input, init) => fetch(input, init));
    const transport =
      options.createTransport?.(transportOptions) ??
      createWebTransport({ ...transportOptions, fetch: (input, init) => fetchFn(input instanceof Request ? input.url : String(input), init) });
    return { send: fetchSender(fetchFn), transport, owned: [] };
  }

  /** `GET /files`: the file at `path`. An empty file gives an empty result. */
  download(path: string, options?: DownloadOptions & { format?: 'text' }): Promise<string>;
  download(path: string, options: DownloadOptions & { format: 'bytes' }): Promise<Uint8Array>;
  download(path: string, options: DownloadOptions & { format: 'blob' }): Promise<Blob>;
  download(path: string, options: DownloadOptions & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  download(path: string, options: DownloadOptions & { format: WebDownloadFormat }): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array>>;
  // The Node build's client adds the `node-stream` format's signatures, whose Node type these declarations leave out.
  async download(path: string, options: DownloadOptions & { format?: DownloadFormat } = {}): Promise<unknown> {
    const format = options.format ?? 'text';
    const url = endpointUrl(this.#envdUrl, '/files', filesQuery(path, options.user ?? this.#user));
    // Without gzip asked for, say so: envd would otherwise spend a
    // compression trial on every file (and compress what compresses), which
    // on a fast link only slows the download down.
    const headers = { ...this.#headers, 'Accept-Encoding': options.gzip ? 'gzip' : 'identity' };
    const call = startCall(options.signal, options.requestTimeoutMs ?? this.#timeoutMs);
    try {
      const answer = await this.#send({ method: 'GET', url, route: '/files', headers, signal: call.signal });
      if (answer.status < 200 || answer.status > 299) throw await errorFromResponse('GET', '/files', answer);
      switch (format) {
        case 'stream':
          call.stopTimer();
          return answer.webStream();
        case 'node-stream':
          if (!answer.nodeStream) {
            await answer.discard();
            throw new EnvdArgumentError('format', "'node-stream' needs Node; use 'stream' (a Web ReadableStream) in a browser");
          }
          call.stopTimer();
          return await answer.nodeStream();
        case 'bytes':
          return await answer.bytes();
        case 'blob':
          return await answer.blob();
        default:
          return await answer.text();
      }
    } catch (err) {
      throw errorFromFailure('GET', '/files', err, call.callerAborted());
    } finally {
      call.stopTimer();
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
      return this.#post(target, user, multipartBody(files, boundary), headers, options.signal, timeoutMs);
    }

    headers['Content-Type'] = 'application/octet-stream';
    if (gzip) headers['Content-Encoding'] = 'gzip';
    for (const f of files) {
      if (!f.path) throw new EnvdArgumentError('path', 'an octet-stream upload needs a target path for every file');
    }
    if (files.length === 1) {
      const [f] = files as [UploadEntry];
      return await this.#post(f.path, user, octetStreamBody(f.data, gzip), headers, options.signal, timeoutMs);
    }
    // One request per file, side by side; the first failure cancels the rest.
    const siblings = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, siblings.signal]) : siblings.signal;
    const results = await Promise.all(
      files.map((f) =>
        this.#post(f.path, user, octetStreamBody(f.data, gzip), headers, signal, timeoutMs).catch((err: unknown) => {
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
  async health(options: CallOptions = {}): Promise<boolean> {
    return this.#call('GET', '/health', undefined, options, async (answer) => {
      if (answer.status >= 200 && answer.status < 300) {
        await answer.discard();
        return true;
      }
      if (answer.status === 502) {
        await answer.discard();
        return false;
      }
      throw await errorFromResponse('GET', '/health', answer);
    });
  }

  /** `GET /metrics`: current CPU, memory and disk usage. */
  metrics(options: CallOptions = {}): Promise<Metrics> {
    return this.#call('GET', '/metrics', undefined, options, async (answer) => {
      const body = await jsonOf('GET', '/metrics', answer);
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw invalidResponse('GET', '/metrics', answer.status, 'a body that is not a metrics object');
      }
      return body as Metrics;
    });
  }

  /**
   * `POST /init`: hands the sandbox to its owner (access token, environment,
   * default user and directory, clock). What the host does when it starts a
   * sandbox or takes one from a pool; resolves once envd applied it.
   */
  init(request: InitRequest, options: CallOptions = {}): Promise<void> {
    const body = bytesBody(new TextEncoder().encode(JSON.stringify(request)));
    return this.#call('POST', '/init', { body, headers: { 'Content-Type': 'application/json' } }, options, async (answer) => {
      if (answer.status < 200 || answer.status > 299) throw await errorFromResponse('POST', '/init', answer);
      await answer.discard();
    });
  }

  /**
   * `POST /streams/end`: ends every stream envd serves now (process output,
   * watches) with the Connect error `unavailable` and `reason`, which their
   * clients are told; the processes keep running. Resolves with how many
   * streams were ended. What a control plane does as it stops.
   */
  endStreams(reason: string, options: CallOptions = {}): Promise<number> {
    const body = bytesBody(new TextEncoder().encode(JSON.stringify({ reason } satisfies StreamsEndRequest)));
    return this.#call('POST', '/streams/end', { body, headers: { 'Content-Type': 'application/json' } }, options, async (answer) => {
      if (answer.status !== 200) throw await errorFromResponse('POST', '/streams/end', answer);
      const answered = await jsonOf('POST', '/streams/end', answer);
      const ended = (answered as { ended?: unknown } | null)?.ended;
      if (typeof ended !== 'number') throw invalidResponse('POST', '/streams/end', answer.status, 'a body without a number `ended`');
      return ended;
    });
  }

  /** Closes the connections the client owns (those of `socketPath`); other clients' are shared and close when idle. */
  async close(): Promise<void> {
    await Promise.all(this.#owned.map((o) => o.close()));
  }

  /** A call whose answer, body included, is read within the deadline. */
  async #call<T>(
    method: 'GET' | 'POST',
    route: string,
    content: { body: RequestBody; headers: Record<string, string> } | undefined,
    options: CallOptions,
    read: (answer: HttpAnswer) => Promise<T>,
  ): Promise<T> {
    const call = startCall(options.signal, options.requestTimeoutMs ?? this.#timeoutMs);
    try {
      const headers = content ? { ...this.#headers, ...content.headers } : this.#headers;
      const answer = await this.#send({ method, url: endpointUrl(this.#envdUrl, route), route, headers, body: content?.body, signal: call.signal });
      return await read(answer);
    } catch (err) {
      throw errorFromFailure(method, route, err, call.callerAborted());
    } finally {
      call.stopTimer();
    }
  }

  async #post(
    path: string | undefined,
    user: string | undefined,
    body: RequestBody,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    timeoutMs: number,
  ): Promise<EntryInfo[]> {
    const url = endpointUrl(this.#envdUrl, '/files', filesQuery(path, user));
    const call = startCall(signal, timeoutMs);
    try {
      const answer = await this.#send({ method: 'POST', url, route: '/files', headers, body, signal: call.signal });
      const entries = await jsonOf('POST', '/files', answer);
      if (!Array.isArray(entries)) throw invalidResponse('POST', '/files', answer.status, 'no list of written files');
      return entries as EntryInfo[];
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

/** The JSON body of a 2xx answer; another status, or a body that is not JSON, throws. */
async function jsonOf(method: string, path: string, answer: HttpAnswer): Promise<unknown> {
  if (answer.status < 200 || answer.status > 299) throw await errorFromResponse(method, path, answer);
  try {
    return JSON.parse(await answer.text());
  } catch (err) {
    throw invalidResponse(method, path, answer.status, 'a body that is not JSON', err);
  }
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
