// Turns what the clients throw into the SDK's error classes: ControlApiError
// (control API), EnvdHttpError / EnvdArgumentError (envd's HTTP routes) and
// ConnectError (envd's RPCs). The class follows what E2B's SDK throws for
// the same answer, so code that catches those keeps working.
import { Code, ConnectError } from '@connectrpc/connect';
import { ControlApiError } from '@paddock/control-client';
import { EnvdArgumentError, EnvdHttpError } from '@paddock/envd-client';
import { asErrorLike } from '@paddock/protocol';
import {
  AuthenticationError,
  ConnectionError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  TimeoutError,
} from './errors.js';

/**
 * What a failed call was about; it decides which NotFoundError subclass a
 * "not found" becomes: a sandbox (control calls on one sandbox), a file
 * (filesystem calls), or anything else (a template on create, a process).
 */
export type ErrorSubject = 'sandbox' | 'file' | 'other';

const notRunning = 'the sandbox is not running: it was killed or paused, or its timeout ran out (see setTimeout)';

/** Socket-level codes (Node's, undici's, node:http2's) of a failure to reach a host at all. */
const NETWORK_CODE = /^(E[A-Z]+|UND_ERR_(SOCKET|CONNECT_TIMEOUT)|ERR_HTTP2_(ERROR|GOAWAY_SESSION|SESSION_ERROR|STREAM_CANCEL|INVALID_SESSION))$/;
/** What browsers' fetch says when the request never got an answer. */
const FETCH_NETWORK_MESSAGE = /^(fetch failed|failed to fetch|networkerror|load failed)/i;

/**
 * Whether `err`, or one of its causes, is a failure to reach the host (a
 * refused or reset connection, a name that does not resolve) rather than an
 * answer. An answer of the proxy about a gone sandbox has no such cause.
 */
export function isNetworkFailure(err: unknown): boolean {
  for (let e = asErrorLike(err), depth = 0; e && depth < 6; e = asErrorLike(e.cause), depth++) {
    if (e.code !== undefined && NETWORK_CODE.test(e.code)) return true;
    if (e.name === 'TypeError' && FETCH_NETWORK_MESSAGE.test(e.message)) return true;
  }
  return false;
}

function unreachable(where: string, message: string, cause: unknown): ConnectionError {
  return new ConnectionError(`cannot reach ${where}: ${message}`, { cause });
}

/** Any failure of a control API call. */
export function fromControlError(err: unknown, subject: ErrorSubject): SandboxError {
  if (err instanceof SandboxError) return err;
  if (!(err instanceof ControlApiError)) return unexpected(err);
  const options = { cause: err, statusCode: err.status };
  switch (err.kind) {
    case 'timeout':
      return new TimeoutError(err.message, options);
    case 'network':
      return unreachable('the control API', err.message, err);
    case 'aborted':
    case 'invalid_response':
      return new SandboxError(err.message, options);
    default:
      break;
  }
  // E2B clients read the status from the `{code, message}` body, not the
  // status line; both are the same for a well-behaved server.
  switch (err.code ?? err.status) {
    case 400:
      return new InvalidArgumentError(err.message, options);
    case 401:
      return new AuthenticationError(`${err.message} (check the API key)`, options);
    case 404:
      return subject === 'sandbox' ? new SandboxNotFoundError(err.message, options) : new NotFoundError(err.message, options);
    case 429:
      return new RateLimitError(err.message, options);
    case 507:
      return new NotEnoughSpaceError(err.message, options);
    default:
      return new SandboxError(err.message, options);
  }
}

/** Any failure of a call to envd's HTTP routes (`/files`, `/health`). */
export function fromEnvdHttpError(err: unknown, subject: ErrorSubject): SandboxError {
  if (err instanceof SandboxError) return err;
  if (err instanceof EnvdArgumentError) return new InvalidArgumentError(err.message, { cause: err });
  if (!(err instanceof EnvdHttpError)) return unexpected(err);
  const options = { cause: err, statusCode: err.status };
  switch (err.kind) {
    case 'bad_request':
      return new InvalidArgumentError(err.message, options);
    case 'unauthorized':
      return new AuthenticationError(err.message, options);
    case 'not_found':
      return subject === 'file' ? new FileNotFoundError(err.message, options) : new NotFoundError(err.message, options);
    case 'rate_limited':
      return new RateLimitError(err.message, options);
    case 'unavailable':
      return unavailable(err.status, err.message, options);
    case 'insufficient_storage':
      return new NotEnoughSpaceError(err.message, options);
    case 'timeout':
      return new TimeoutError(err.message, options);
    case 'network':
      return unreachable('the sandbox', err.message, err);
    default:
      return new SandboxError(err.message, options);
  }
}

/**
 * The proxy answers 502 for a sandbox it has no running instance of; 503 and
 * 504 are a server that is overloaded or slow, the sandbox possibly fine.
 */
function unavailable(status: number | undefined, message: string, options: { cause: unknown; statusCode?: number | undefined }): SandboxError {
  if (status === 504) return new TimeoutError(message, options);
  if (status === 503) return new SandboxError(message, options);
  return new SandboxNotFoundError(`${message}: ${notRunning}`, options);
}

/** Any failure of an envd RPC (filesystem or process service). */
export function fromRpcError(err: unknown, subject: ErrorSubject): SandboxError {
  if (err instanceof SandboxError) return err;
  const connectError = ConnectError.from(err);
  const options = { cause: err };
  const message = connectError.message;
  const code = connectError.code;
  if ((code === Code.Unavailable || code === Code.Unknown || code === Code.Internal) && isNetworkFailure(err)) {
    return unreachable('the sandbox', message, err);
  }
  switch (code) {
    case Code.InvalidArgument:
      return new InvalidArgumentError(message, options);
    case Code.Unauthenticated:
      return new AuthenticationError(message, options);
    case Code.NotFound:
      return subject === 'file' ? new FileNotFoundError(message, options) : new NotFoundError(message, options);
    case Code.ResourceExhausted:
      // envd answers resource_exhausted for a full disk; elsewhere it means a quota.
      return subject === 'file' ? new NotEnoughSpaceError(message, options) : new RateLimitError(message, options);
    case Code.DeadlineExceeded:
      return new TimeoutError(message, options);
    case Code.Unavailable:
      // What Connect makes of the proxy's 502 for a sandbox it has no running instance of.
      return new SandboxNotFoundError(`${message}: ${notRunning}`, options);
    default:
      return new SandboxError(message, options);
  }
}

function unexpected(err: unknown): SandboxError {
  const message = err instanceof Error ? err.message : String(err);
  if (isNetworkFailure(err)) return new ConnectionError(message, { cause: err });
  return new SandboxError(message, { cause: err });
}
