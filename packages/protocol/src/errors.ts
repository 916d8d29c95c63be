// What an HTTP answer of envd (or of the proxy in front of it) means. The
// Connect services carry their own codes; these are for `/files`,
// `/health`, `/metrics` and the proxy's own refusals, which answer
// `{code, message}` with these statuses.

export type EnvdErrorKind =
  | 'bad_request' // 400: e.g. a directory where a file is expected, bad metadata
  | 'unauthorized' // 401: missing or wrong access token, expired signature
  | 'forbidden' // 403
  | 'not_found' // 404: no such file
  | 'not_acceptable' // 406: no encoding the client accepts
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
export function envdErrorKind(status: number): EnvdErrorKind {
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
