import { envdErrorKind, type EnvdErrorKind } from '@paddock/protocol';

export type { EnvdErrorKind };

export interface EnvdHttpErrorDetails {
  kind: EnvdErrorKind;
  method: string;
  path: string;
  status?: number;
  code?: number;
  serverMessage?: string;
  cause?: unknown;
}

/** Base of the errors this package throws itself. */
export class EnvdError extends Error {
  override readonly name: string = 'EnvdError';
}

/** A failed HTTP call to envd, kept structured for a facade to map. */
export class EnvdHttpError extends EnvdError {
  override readonly name = 'EnvdHttpError';
  readonly kind: EnvdErrorKind;
  readonly method: string;
  /** Path of the call (`/files`, `/health`…), without the query. */
  readonly path: string;
  /** HTTP status, when envd (or the proxy) answered. */
  readonly status: number | undefined;
  /** `code` of the `{code, message}` error body. */
  readonly code: number | undefined;
  /** `message` of the error body, or the body text when it is not JSON. */
  readonly serverMessage: string | undefined;

  constructor(message: string, details: EnvdHttpErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.kind = details.kind;
    this.method = details.method;
    this.path = details.path;
    this.status = details.status;
    this.code = details.code;
    this.serverMessage = details.serverMessage;
  }
}

/** An argument refused before anything was sent (bad metadata, a signature option without a token…). */
export class EnvdArgumentError extends EnvdError {
  override readonly name = 'EnvdArgumentError';
  /** Name of the offending argument, e.g. `metadata`. */
  readonly argument: string;

  constructor(argument: string, message: string) {
    super(message);
    this.argument = argument;
  }
}

/** What the error of a non-2xx answer is read from. */
export interface ErrorAnswer {
  readonly status: number;
  readonly statusText: string;
  text(): Promise<string>;
}

/** Reads the error body of a non-2xx answer and builds the error. */
export async function errorFromResponse(method: string, path: string, response: ErrorAnswer): Promise<EnvdHttpError> {
  const text = (await response.text().catch(() => '')).trim();
  let code: number | undefined;
  let serverMessage: string | undefined = text || undefined;
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === 'object' && body !== null) {
      const fields = body as Record<string, unknown>;
      if (typeof fields.code === 'number') code = fields.code;
      if (typeof fields.message === 'string') serverMessage = fields.message;
    }
  } catch {
    // Not JSON: the text itself is the message.
  }
  const detail = serverMessage ?? `empty body${response.statusText ? ` (${response.statusText})` : ''}`;
  return new EnvdHttpError(`${method} ${path} failed with ${response.status}: ${detail}`, {
    kind: envdErrorKind(response.status),
    method,
    path,
    status: response.status,
    code,
    serverMessage,
  });
}

/** Builds the error for a call that got no usable answer. */
export function errorFromFailure(method: string, path: string, err: unknown, callerAborted: boolean): EnvdError {
  if (err instanceof EnvdError) return err;
  const like = asErrorLike(err);
  let kind: EnvdErrorKind;
  let what: string;
  if (callerAborted) {
    kind = 'aborted';
    what = 'was aborted by the caller';
  } else if (like?.name === 'TimeoutError') {
    kind = 'timeout';
    what = 'timed out';
  } else {
    kind = 'network';
    what = `failed: ${describeFailure(err)}`;
  }
  return new EnvdHttpError(`${method} ${path} ${what}`, { kind, method, path, cause: err });
}

function describeFailure(err: unknown): string {
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
 * Reads an error by shape: errors raised inside Node's fetch can come from
 * another realm (a VM context, a test runner), where `instanceof Error` fails.
 */
function asErrorLike(value: unknown): { name: string; message: string; code: string | undefined; cause: unknown } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { name, message, code, cause } = value as Record<string, unknown>;
  if (typeof message !== 'string') return undefined;
  return { name: typeof name === 'string' ? name : 'Error', message, code: typeof code === 'string' ? code : undefined, cause };
}
