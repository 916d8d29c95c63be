// Turns what the clients throw into the SDK's error classes: ControlApiError
// (control API), EnvdHttpError / EnvdArgumentError (envd's HTTP routes) and
// ConnectError (envd's RPCs). The class follows what E2B's SDK throws for
// the same answer, so code that catches those keeps working.
import { Code, ConnectError } from '@connectrpc/connect';
import { ControlApiError } from '@paddock/control-client';
import { EnvdArgumentError, EnvdHttpError } from '@paddock/envd-client';
import {
  AuthenticationError,
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

const notRunning = 'the sandbox is not running anymore, most likely because its timeout ran out (see setTimeout)';

/** Any failure of a control API call. */
export function fromControlError(err: unknown, subject: ErrorSubject): SandboxError {
  if (err instanceof SandboxError) return err;
  if (!(err instanceof ControlApiError)) return unexpected(err);
  const options = { cause: err, statusCode: err.status };
  switch (err.kind) {
    case 'timeout':
      return new TimeoutError(err.message, options);
    case 'aborted':
    case 'network':
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
      return new TimeoutError(`${err.message}: ${notRunning}`, options);
    case 'insufficient_storage':
      return new NotEnoughSpaceError(err.message, options);
    case 'timeout':
      return new TimeoutError(err.message, options);
    default:
      return new SandboxError(err.message, options);
  }
}

/** Any failure of an envd RPC (filesystem or process service). */
export function fromRpcError(err: unknown, subject: ErrorSubject): SandboxError {
  if (err instanceof SandboxError) return err;
  const connectError = ConnectError.from(err);
  const options = { cause: err };
  const message = connectError.message;
  switch (connectError.code) {
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
      // The sandbox proxy answers 502 for a sandbox that is gone; Connect reads it as unavailable.
      return new TimeoutError(`${message}: ${notRunning}`, options);
    default:
      return new SandboxError(message, options);
  }
}

function unexpected(err: unknown): SandboxError {
  const message = err instanceof Error ? err.message : String(err);
  return new SandboxError(message, { cause: err });
}
