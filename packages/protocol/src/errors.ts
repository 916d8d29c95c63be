// What a failed HTTP call means, for every HTTP answer of the protocol: the
// control API, envd's routes (`/files`, `/health`, `/metrics`) and the
// proxy's own refusals, which all answer `{code, message}`. envd's Connect
// services carry their own codes instead.

export type ErrorKind =
  | 'bad_request' // 400: e.g. a directory where a file is expected, bad metadata
  | 'unauthorized' // 401: missing or wrong access token, expired signature
  | 'forbidden' // 403
  | 'not_found' // 404: no such file
  | 'not_acceptable' // 406: no encoding the client accepts
  | 'conflict' // 409: the sandbox or file is not in the state the call needs
  | 'rate_limited' // 429
  | 'unavailable' // 502, 503, 504: the sandbox is not running (through the proxy)
  | 'insufficient_storage' // 507: disk full
  | 'server' // any other 5xx
  | 'http' // any other non-2xx status
  | 'invalid_response' // a 2xx whose body is not what the call returns
  | 'timeout' // the request's deadline elapsed
  | 'aborted' // the caller's AbortSignal fired
  | 'network'; // no answer: connection refused, reset…

/** The kind of a non-2xx status. */
export function errorKindOf(status: number): ErrorKind {
  switch (status) {
    case 400:
      return 'bad_request';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 406:
      return 'not_acceptable';
    case 409:
      return 'conflict';
    case 429:
      return 'rate_limited';
    case 502:
    case 503:
    case 504:
      return 'unavailable';
    case 507:
      return 'insufficient_storage';
    default:
      return status >= 500 ? 'server' : 'http';
  }
}

/** The body of every error answer of the control API, the proxy and envd's HTTP routes. */
export interface ErrorBody {
  code: number;
  message: string;
}

export interface ErrorLike {
  name: string;
  message: string;
  code: string | undefined;
  cause: unknown;
}

/**
 * Reads an error by shape: errors raised inside Node's fetch can come from
 * another realm (a VM context, a test runner), where `instanceof Error` fails.
 */
export function asErrorLike(value: unknown): ErrorLike | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { name, message, code, cause } = value as Record<string, unknown>;
  if (typeof message !== 'string') return undefined;
  return { name: typeof name === 'string' ? name : 'Error', message, code: typeof code === 'string' ? code : undefined, cause };
}

/** A failure and its causes in one line: fetch hides the socket's error behind "fetch failed". */
export function describeFailure(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const like = asErrorLike(e);
    if (!like) {
      parts.push(String(e));
      break;
    }
    parts.push(like.code !== undefined ? `${like.message} (${like.code})` : like.message);
    e = like.cause;
  }
  return parts.join(': ') || 'unknown error';
}

/**
 * The kind of a call that got no usable answer, and what happened in words
 * that follow "{method} {path}". `callerAborted` tells a cancellation by
 * the caller apart from the client's own timeout, which both surface as
 * aborts.
 */
export function failureOf(err: unknown, callerAborted: boolean): { kind: ErrorKind; what: string } {
  const name = asErrorLike(err)?.name;
  if (callerAborted) return { kind: 'aborted', what: 'was aborted by the caller' };
  if (name === 'TimeoutError') return { kind: 'timeout', what: 'timed out' };
  if (name === 'SyntaxError') return { kind: 'invalid_response', what: 'got a body that is not valid JSON' };
  return { kind: 'network', what: `failed: ${describeFailure(err)}` };
}

/** What an error of a failed HTTP call carries, in every client. */
export interface HttpCallErrorDetails {
  kind: ErrorKind;
  method: string;
  path: string;
  status?: number;
  code?: number;
  serverMessage?: string;
  cause?: unknown;
}

// TypeScript accepts a class as a mixin's base only when its constructor takes `...any[]`.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ErrorClass = new (...args: any[]) => Error;

/**
 * Gives an error class the fields of a failed HTTP call, built from
 * `(message, details)`. A mixin rather than a base class, so that each client
 * keeps its own hierarchy (envd's `EnvdHttpError` is an `EnvdError`, the
 * control API's `ControlApiError` an `Error`) while both read the same fields.
 */
export function withHttpCallFields<TBase extends ErrorClass>(Base: TBase) {
  return class HttpCallError extends Base {
    readonly kind: ErrorKind;
    /** HTTP method of the failed call. */
    readonly method: string;
    /** Path of the failed call, as sent (path parameters filled in), without the query. */
    readonly path: string;
    /** HTTP status, when the server (or the proxy) answered. */
    readonly status: number | undefined;
    /**
     * `code` of the `{code, message}` error body. E2B clients branch on this
     * rather than on the status, so it is kept apart from `status`.
     */
    readonly code: number | undefined;
    /** `message` of the error body, or the body text when it is not JSON. */
    readonly serverMessage: string | undefined;

    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    constructor(...args: any[]) {
      const [message, details] = args as [string, HttpCallErrorDetails];
      super(message, details.cause === undefined ? undefined : { cause: details.cause });
      this.kind = details.kind;
      this.method = details.method;
      this.path = details.path;
      this.status = details.status;
      this.code = details.code;
      this.serverMessage = details.serverMessage;
    }
  };
}

/** The message and details of the error for a failed call, for a client to build its own error class from. */
export interface HttpCallFailure {
  message: string;
  /** `errorCode` is the body's optional `error_code`, which only the control API sends. */
  details: HttpCallErrorDetails & { errorCode?: string };
}

/**
 * The error of a non-2xx answer. `body` is what the client made of the body:
 * parsed JSON, the text when it is not JSON, or undefined when there was
 * none. Reads it leniently, as servers vary: a `code` sent as a string of
 * digits counts, a JSON body without a `message` is the message as a whole.
 */
export function answerFailure(method: string, path: string, status: number, statusText: string, body: unknown): HttpCallFailure {
  let code: number | undefined;
  let errorCode: string | undefined;
  let serverMessage: string | undefined;
  if (typeof body === 'object' && body !== null) {
    const fields = body as Record<string, unknown>;
    if (typeof fields.code === 'number') code = fields.code;
    else if (typeof fields.code === 'string' && /^\d+$/.test(fields.code)) code = Number(fields.code);
    if (typeof fields.error_code === 'string') errorCode = fields.error_code;
    serverMessage = typeof fields.message === 'string' ? fields.message : JSON.stringify(body);
  } else if (typeof body === 'string') {
    serverMessage = body.trim() || undefined;
  } else if (body !== undefined && body !== null) {
    serverMessage = String(body);
  }
  const detail = serverMessage ?? `empty body${statusText.trim() ? ` (${statusText.trim()})` : ''}`;
  return {
    message: `${method} ${path} failed with ${status}: ${detail}`,
    details: { kind: errorKindOf(status), method, path, status, code, errorCode, serverMessage },
  };
}

/** The error of a call that got no usable answer; `callerAborted` as for {@link failureOf}. */
export function callFailure(method: string, path: string, err: unknown, callerAborted: boolean): HttpCallFailure {
  const { kind, what } = failureOf(err, callerAborted);
  return { message: `${method} ${path} ${what}`, details: { kind, method, path, cause: err } };
}
