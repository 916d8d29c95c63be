import { errorKindOf, failureOf, type ErrorKind } from '@paddock/protocol';

/**
 * What went wrong with a control API call. HTTP answers are classified by
 * status; the other kinds are failures with no usable answer.
 */
export type ControlErrorKind = ErrorKind;

export interface ControlApiErrorDetails {
  kind: ControlErrorKind;
  method: string;
  path: string;
  status?: number;
  code?: number;
  errorCode?: string;
  serverMessage?: string;
  retryAfterSeconds?: number;
  cause?: unknown;
}

/**
 * The one error type this package throws for a failed call. It stays
 * structured (status, body `code`, server message) so that a facade can map
 * it into its own error classes; `cause` keeps the underlying failure.
 */
export class ControlApiError extends Error {
  override readonly name = 'ControlApiError';
  readonly kind: ControlErrorKind;
  /** HTTP method of the failed call. */
  readonly method: string;
  /** Path of the failed call, as sent (path parameters filled in). */
  readonly path: string;
  /** HTTP status, when the server answered. */
  readonly status: number | undefined;
  /**
   * `code` of the `{code, message}` error body. E2B clients branch on this
   * rather than on the status, so it is kept apart from `status`.
   */
  readonly code: number | undefined;
  /** Optional `error_code` of the error body. */
  readonly errorCode: string | undefined;
  /** `message` of the error body, or the body text when it is not JSON. */
  readonly serverMessage: string | undefined;
  /** Integer `Retry-After` of the final answer, in seconds. */
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, details: ControlApiErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.kind = details.kind;
    this.method = details.method;
    this.path = details.path;
    this.status = details.status;
    this.code = details.code;
    this.errorCode = details.errorCode;
    this.serverMessage = details.serverMessage;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** Integer seconds of a `Retry-After` header; an HTTP-date is ignored. */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get('retry-after')?.trim();
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}

/**
 * Builds the error for a non-2xx answer. `body` is what openapi-fetch made of
 * the body: parsed JSON, the raw text when it is not JSON, or undefined when
 * there was none.
 */
export function errorFromResponse(method: string, path: string, response: Response, body: unknown): ControlApiError {
  let code: number | undefined;
  let errorCode: string | undefined;
  let serverMessage: string | undefined;
  if (typeof body === 'object' && body !== null) {
    const fields = body as Record<string, unknown>;
    // Some servers send the code as a string; keep it only when it is a number.
    if (typeof fields.code === 'number') code = fields.code;
    else if (typeof fields.code === 'string' && /^\d+$/.test(fields.code)) code = Number(fields.code);
    if (typeof fields.error_code === 'string') errorCode = fields.error_code;
    if (typeof fields.message === 'string') serverMessage = fields.message;
    else serverMessage = JSON.stringify(body);
  } else if (typeof body === 'string' && body.trim() !== '') {
    serverMessage = body.trim();
  } else if (body !== undefined && body !== null && body !== '') {
    serverMessage = String(body);
  }
  const statusText = response.statusText ? ` ${response.statusText}` : '';
  const detail = serverMessage ?? `empty body${statusText ? ` (${statusText.trim()})` : ''}`;
  return new ControlApiError(`${method} ${path} failed with ${response.status}: ${detail}`, {
    kind: errorKindOf(response.status),
    method,
    path,
    status: response.status,
    code,
    errorCode,
    serverMessage,
    retryAfterSeconds: retryAfterSeconds(response.headers),
  });
}

/**
 * Builds the error for a call that got no usable answer. `callerAborted`
 * tells a cancellation by the caller apart from the client's own timeout,
 * which both surface as aborts.
 */
export function errorFromFailure(method: string, path: string, err: unknown, callerAborted: boolean): ControlApiError {
  if (err instanceof ControlApiError) return err;
  const { kind, what } = failureOf(err, callerAborted);
  return new ControlApiError(`${method} ${path} ${what}`, { kind, method, path, cause: err });
}
