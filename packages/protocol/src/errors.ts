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
