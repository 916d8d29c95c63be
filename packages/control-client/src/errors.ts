import { answerFailure, callFailure, withHttpCallFields, type ErrorKind, type HttpCallErrorDetails } from '@paddock/protocol';

/**
 * What went wrong with a control API call. HTTP answers are classified by
 * status; the other kinds are failures with no usable answer.
 */
export type ControlErrorKind = ErrorKind;

/** What a `ControlApiError` is built from. */
export interface ControlApiErrorDetails extends HttpCallErrorDetails {
  /** Optional `error_code` of the error body. */
  errorCode?: string;
  /** Integer `Retry-After` of the final answer, in seconds. */
  retryAfterSeconds?: number;
}

/**
 * The one error type this package throws for a failed call. It stays
 * structured (kind, method, path, status, body `code`, server message: the
 * fields envd's client has too) so that a facade can map it into its own
 * error classes; `cause` keeps the underlying failure.
 */
export class ControlApiError extends withHttpCallFields(Error) {
  /** Always `ControlApiError`. */
  override readonly name = 'ControlApiError';
  /** Optional `error_code` of the error body. */
  readonly errorCode: string | undefined;
  /** Integer `Retry-After` of the final answer, in seconds. */
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, details: ControlApiErrorDetails) {
    super(message, details);
    this.errorCode = details.errorCode;
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
  const { message, details } = answerFailure(method, path, response.status, response.statusText, body);
  return new ControlApiError(message, { ...details, retryAfterSeconds: retryAfterSeconds(response.headers) });
}

/**
 * Builds the error for a call that got no usable answer. `callerAborted`
 * tells a cancellation by the caller apart from the client's own timeout,
 * which both surface as aborts.
 */
export function errorFromFailure(method: string, path: string, err: unknown, callerAborted: boolean): ControlApiError {
  if (err instanceof ControlApiError) return err;
  const { message, details } = callFailure(method, path, err, callerAborted);
  return new ControlApiError(message, details);
}
