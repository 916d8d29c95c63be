// The default transport in Node: Connect's protocol over HTTP/1.1 (http1.ts)
// with as little as possible between a call and its socket.
//
// connect-node passes every call through a chain of async generators (body,
// envelopes, compression, parsing) and ends it by aborting a signal with a
// fresh ConnectError. For the short calls an SDK makes all the time that is
// most of the client's work: starting `bash -l -c true` in a sandbox through
// the proxy cost 1.8-1.9 ms of client CPU per call with connect-node, 1.0-1.3
// ms with this transport when it ran over node:http, and 0.7 ms as a bare
// node:http request.
//
// Here a unary or server-streaming call is one request whose body is known up
// front, sent with its length in one write; the answer is read as it arrives,
// envelopes cut from the socket's chunks and parsed as they complete. Request
// headers, errors, end of stream and deadlines follow Connect, built with
// @connectrpc/connect's own protocol helpers. Client- and bidi-streaming calls
// (envd's StreamInput) go to connect-node's transport.
import { create, isMessage, type DescMessage, type DescMethodStreaming, type DescMethodUnary, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  createContextValues,
  type ContextValues,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import {
  createMethodSerializationLookup,
  createMethodUrl,
  getAbortSignalReason,
  type MethodSerializationLookup,
} from '@connectrpc/connect/protocol';
import { endStreamFlag, endStreamFromJson, errorFromJsonBytes, requestHeader, trailerDemux, validateResponse } from '@connectrpc/connect/protocol-connect';
import * as http1 from './http1.js';
import { OneMessage } from './service-client.js';

export interface NodeTransportOptions {
  baseUrl: string;
  useBinaryFormat: boolean;
  interceptors?: Interceptor[];
}

type HeaderInit = ConstructorParameters<typeof Headers>[0];

function asMessage<I extends DescMessage>(schema: I, m: MessageInitShape<I>): MessageShape<I> {
  return isMessage(m, schema) ? m : create(schema, m);
}

async function* asMessages<I extends DescMessage>(schema: I, input: AsyncIterable<MessageInitShape<I>>): AsyncIterable<MessageShape<I>> {
  for await (const m of input) yield asMessage(schema, m);
}

/** Messages parsed ahead of a reader that is not reading before the socket is paused. */
const READ_AHEAD = 16;

/** The flag of a compressed envelope: this transport asks for none, so none may come. */
const COMPRESSED_FLAG = 0b01;

/**
 * A Connect transport over HTTP/1.1, with or without TLS. Unary and
 * server-streaming calls are made here; other kinds go to connect-node's
 * `createConnectTransport`.
 */
export function createNodeTransport(options: NodeTransportOptions): Transport {
  const interceptors = options.interceptors ?? [];
  const binary = options.useBinaryFormat;
  let fallback: Transport | undefined;
  const serializations = new WeakMap<object, MethodSerializationLookup<DescMessage, DescMessage>>();
  const serializationOf = (method: DescMethodUnary | DescMethodStreaming) => {
    let s = serializations.get(method);
    if (!s) serializations.set(method, (s = createMethodSerializationLookup(method, undefined, undefined, { readMaxBytes: 0xffffffff, writeMaxBytes: 0xffffffff })));
    return s;
  };

  /**
   * Runs `next` through the interceptors with the call's signal, which fires
   * when the caller's does or the deadline passes. `fail` turns whatever
   * stopped the call into its ConnectError (a passed deadline wins, since a
   * destroyed request only says it was aborted); `fail` and `done` release
   * the timer and the listener on the caller's signal.
   */
  function callWith<Req extends UnaryRequest | StreamRequest, Res>(
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    build: (signal: AbortSignal) => Req,
    next: (req: Req, fail: (reason: unknown) => ConnectError, done: () => void) => Promise<Res>,
  ): Promise<Res> {
    const controller = new AbortController();
    let expired: ConnectError | undefined;
    const timer =
      timeoutMs !== undefined && timeoutMs > 0
        ? setTimeout(() => {
            expired = new ConnectError('the operation timed out', Code.DeadlineExceeded);
            controller.abort(expired);
          }, timeoutMs)
        : undefined;
    const onAbort = (): void => controller.abort(getAbortSignalReason(signal!));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (reason: unknown): ConnectError => {
      done();
      return expired ?? asConnectError(reason);
    };
    let chain = (req: UnaryRequest | StreamRequest): Promise<unknown> => next(req as Req, fail, done);
    for (let i = interceptors.length - 1; i >= 0; i--) chain = interceptors[i]!(chain as never) as typeof chain;
    return (chain(build(controller.signal)) as Promise<Res>).catch((err: unknown) => {
      throw fail(err);
    });
  }

  function headersFor(kind: 'unary' | 'server_streaming', timeoutMs: number | undefined, header: HeaderInit | undefined): Headers {
    return requestHeader(kind, binary, timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined, header, true);
  }

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeaderInit | undefined,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const serialization = serializationOf(method);
      return callWith<UnaryRequest<I, O>, UnaryResponse<I, O>>(
        signal,
        timeoutMs,
        (sig) => ({
          stream: false,
          service: method.parent,
          method,
          requestMethod: 'POST',
          url: createMethodUrl(options.baseUrl, method),
          header: headersFor('unary', timeoutMs, header),
          contextValues: contextValues ?? createContextValues(),
          message: asMessage(method.input, input),
          signal: sig,
        }),
        async (req, fail, done) => {
          const body = serialization.getI(binary).serialize(req.message);
          const res = await send(req.url, req.header, body, req.signal);
          const [resHeader, trailer] = trailerDemux(res.headers);
          const { isUnaryError, unaryError } = validated(res, () => validateResponse(method.methodKind, binary, res.status, resHeader));
          const bytes = await http1.bytesOf(res, req.signal).catch((err: unknown) => {
            throw fail(req.signal.aborted ? err : fromNodeError(err as Error));
          });
          done();
          if (isUnaryError) {
            const metadata = new Headers(resHeader);
            trailer.forEach((value, key) => metadata.append(key, value));
            throw errorFromJsonBytes(bytes, metadata, unaryError);
          }
          return {
            stream: false,
            service: method.parent,
            method,
            header: resHeader,
            message: serialization.getO(binary).parse(bytes) as MessageShape<O>,
            trailer,
          };
        },
      );
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeaderInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      if (method.methodKind !== 'server_streaming') {
        fallback ??= createConnectTransport({ baseUrl: options.baseUrl, useBinaryFormat: binary, interceptors, httpVersion: '1.1' });
        return fallback.stream(method, signal, timeoutMs, header, input, contextValues);
      }
      const serialization = serializationOf(method);
      return callWith<StreamRequest<I, O>, StreamResponse<I, O>>(
        signal,
        timeoutMs,
        (sig) => ({
          stream: true,
          service: method.parent,
          method,
          requestMethod: 'POST',
          url: createMethodUrl(options.baseUrl, method),
          header: headersFor('server_streaming', timeoutMs, header),
          contextValues: contextValues ?? createContextValues(),
          message: input instanceof OneMessage ? new OneMessage(asMessage(method.input, input.message)) : asMessages(method.input, input),
          signal: sig,
        }),
        async (req, fail, done) => {
          // A server-streaming call has exactly one request message.
          let message: MessageShape<I>;
          if (req.message instanceof OneMessage) {
            message = req.message.message as MessageShape<I>;
          } else {
            const first = await req.message[Symbol.asyncIterator]().next();
            if (first.done) throw new ConnectError('protocol error: missing request message', Code.Internal);
            message = first.value;
          }
          const payload = serialization.getI(binary).serialize(message);
          const body = new Uint8Array(5 + payload.length);
          new DataView(body.buffer).setUint32(1, payload.length);
          body.set(payload, 5);
          const res = await send(req.url, req.header, body, req.signal);
          const resHeader = res.headers;
          validated(res, () => validateResponse(method.methodKind, binary, res.status, resHeader));
          const trailer = new Headers();
          const parse = serialization.getO(binary);
          return {
            stream: true,
            service: method.parent,
            method,
            header: resHeader,
            trailer,
            message: messagesOf<MessageShape<O>>(res, req.signal, {
              parse: (bytes) => parse.parse(bytes) as MessageShape<O>,
              onEnd: (bytes) => {
                // Most streams end with `{}`: nothing to read, and connect's parser makes an error object up front.
                if (bytes.length === 2 && bytes[0] === 0x7b && bytes[1] === 0x7d) return;
                const end = endStreamFromJson(bytes);
                if (end.error) {
                  resHeader.forEach((value, key) => end.error!.metadata.append(key, value));
                  throw end.error;
                }
                end.metadata.forEach((value, key) => trailer.set(key, value));
              },
              fail,
              done,
            }),
          };
        },
      );
    },
  };
}

/** Sends a call's request; a failure of the connection comes back as its ConnectError. */
function send(url: string, header: Headers, body: Uint8Array, signal: AbortSignal): Promise<http1.Http1Response> {
  const headers: Record<string, string> = {};
  header.forEach((value, key) => (headers[key] = value));
  return http1.request(url, { method: 'POST', headers, body: [body], signal }).catch((err: unknown) => {
    throw signal.aborted ? err : fromNodeError(err as Error);
  });
}

/** Runs connect's check of an answer's head; an answer it refuses is not read (its connection is closed). */
function validated<T>(res: http1.Http1Response, check: () => T): T {
  try {
    return check();
  } catch (err) {
    http1.dropBody(res);
    throw err;
  }
}

interface StreamHandlers<M> {
  parse(bytes: Uint8Array): M;
  /** The end-of-stream message; throws the call's error if it carries one. */
  onEnd(bytes: Uint8Array): void;
  fail(reason: unknown): ConnectError;
  done(): void;
}

/**
 * The messages of a Connect stream response, parsed as their envelopes
 * complete. Reading ahead stops after READ_AHEAD unread messages (the
 * socket is paused, and the server feels it); `return()` closes the stream.
 */
function messagesOf<M>(res: http1.Http1Response, signal: AbortSignal, handlers: StreamHandlers<M>): AsyncIterable<M> {
  const queue: M[] = [];
  let flow: http1.BodyFlow | undefined;
  let paused = false;
  let chunks: Buffer[] = [];
  let buffered = 0;
  let ended = false;
  let finished = false;
  let failure: ConnectError | undefined;
  const waiting: (() => void)[] = [];
  const wake = (): void => {
    for (const w of waiting.splice(0)) w();
  };

  const settle = (err?: unknown): void => {
    if (finished) return;
    finished = true;
    signal.removeEventListener('abort', onAbort);
    if (err !== undefined) failure = handlers.fail(err);
    else handlers.done();
    wake();
  };
  const onAbort = (): void => {
    if (flow) flow.cancel();
    else http1.dropBody(res);
    settle(getAbortSignalReason(signal));
  };

  /** Cuts every complete envelope off the front of what has arrived. */
  const take = (): void => {
    while (buffered >= 5) {
      // A header split across chunks is joined at once (a few bytes have arrived); the
      // envelope itself only when all of it is here, so that each byte is copied once.
      if (chunks[0]!.length < 5) chunks = [Buffer.concat(chunks, buffered)];
      const length = chunks[0]!.readUInt32BE(1);
      if (buffered < 5 + length) return;
      const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, buffered);
      const flags = buf[0]!;
      const data = buf.subarray(5, 5 + length);
      const rest = buf.subarray(5 + length);
      chunks = rest.length > 0 ? [rest] : [];
      buffered = rest.length;
      if (ended) throw new ConnectError('protocol error: received extra message after EndStreamResponse', Code.InvalidArgument);
      if (flags & COMPRESSED_FLAG) throw new ConnectError('protocol error: received compressed message, but no compression was negotiated', Code.Internal);
      if (flags & endStreamFlag) {
        ended = true;
        handlers.onEnd(data);
      } else {
        queue.push(handlers.parse(data));
      }
    }
  };

  if (signal.aborted) {
    onAbort();
  } else {
    signal.addEventListener('abort', onAbort, { once: true });
    flow = res.read({
      chunk(piece) {
        if (finished) return;
        chunks.push(piece);
        buffered += piece.length;
        try {
          take();
        } catch (err) {
          flow?.cancel();
          settle(err);
          return;
        }
        if (queue.length >= READ_AHEAD && !paused) {
          paused = true;
          flow?.pause();
        }
        wake();
      },
      end() {
        if (buffered > 0) settle(new ConnectError('protocol error: incomplete envelope', Code.InvalidArgument));
        else if (!ended) settle(new ConnectError('protocol error: missing EndStreamResponse', Code.InvalidArgument));
        else settle();
      },
      fail(err) {
        if (signal.aborted) settle(getAbortSignalReason(signal));
        else if (err instanceof http1.CutShort) settle(new ConnectError('the connection closed before the stream ended', Code.Unavailable));
        else settle(fromNodeError(err));
      },
    });
    // What came with the head is handed over inside `read`, before `flow` was set: it may have ended the call.
    if (finished) flow.cancel();
  }

  const iterator: AsyncIterator<M> = {
    async next(): Promise<IteratorResult<M>> {
      for (;;) {
        if (queue.length > 0) {
          const value = queue.shift()!;
          if (paused && queue.length < READ_AHEAD / 2 && !finished) {
            paused = false;
            flow?.resume();
          }
          return { done: false, value };
        }
        if (failure) throw failure;
        if (finished) return { done: true, value: undefined };
        await new Promise<void>((resolve) => waiting.push(resolve));
      }
    },
    async return(): Promise<IteratorResult<M>> {
      if (!finished) {
        flow?.cancel();
        settle(new ConnectError('the stream was closed by the client', Code.Canceled));
      }
      return { done: true, value: undefined };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  cause?: unknown;
}

/** Errors are recognised by shape, not `instanceof`: Node's own may come from another realm (a vm, jest). */
function errorLike(value: unknown): ErrorLike | undefined {
  return typeof value === 'object' && value !== null ? (value as ErrorLike) : undefined;
}

/** What stopped a call, as the ConnectError connect gives for it: an abort is `canceled`. */
function asConnectError(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const e = errorLike(reason);
  if (e?.name === 'AbortError' && typeof e.message === 'string') return new ConnectError(e.message, Code.Canceled, undefined, undefined, reason);
  return ConnectError.from(reason);
}

/** Node's socket errors as Connect codes, the way connect-node maps them. */
function fromNodeError(err: Error): ConnectError {
  const codes: string[] = [];
  for (let e = errorLike(err); e && codes.length < 8; e = errorLike(e.cause)) {
    if (typeof e.code === 'string') codes.push(e.code);
  }
  let code = Code.Internal;
  if (codes.some((c) => c === 'ERR_STREAM_WRITE_AFTER_END' || c === 'ERR_STREAM_DESTROYED' || c === 'ECONNRESET')) code = Code.Aborted;
  else if (codes.some((c) => c === 'ETIMEDOUT' || c === 'ENOTFOUND' || c === 'EAI_AGAIN' || c === 'ECONNREFUSED')) code = Code.Unavailable;
  return new ConnectError(typeof err.message === 'string' ? err.message : String(err), code, undefined, undefined, err);
}
