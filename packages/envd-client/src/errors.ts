import { errorKindOf, failureOf, type ErrorKind } from '@paddock/protocol';

/** What went wrong with an HTTP call to envd; RPC failures stay `ConnectError`s with their Connect code. */
export type EnvdErrorKind = ErrorKind;

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
    kind: errorKindOf(response.status),
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
  const { kind, what } = failureOf(err, callerAborted);
  return new EnvdHttpError(`${method} ${path} ${what}`, { kind, method, path, cause: err });
}
