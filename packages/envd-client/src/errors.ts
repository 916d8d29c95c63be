import { answerFailure, callFailure, withHttpCallFields, type ErrorKind, type HttpCallErrorDetails } from '@paddock/protocol';

/** What went wrong with an HTTP call to envd; RPC failures stay `ConnectError`s with their Connect code. */
export type EnvdErrorKind = ErrorKind;

/** What an `EnvdHttpError` is built from: the call, the answer's status and body, and the kind of failure. */
export type EnvdHttpErrorDetails = HttpCallErrorDetails;

/** Base of the errors this package throws itself. */
export class EnvdError extends Error {
  /** Name of the class, for telling errors apart without `instanceof`. */
  override readonly name: string = 'EnvdError';
}

/**
 * A failed HTTP call to envd, kept structured for a facade to map: the same
 * fields as the control API client's errors, and an `EnvdError` all the same.
 */
export class EnvdHttpError extends withHttpCallFields(EnvdError) {
  /** Always `EnvdHttpError`. */
  override readonly name = 'EnvdHttpError';

  // Declared to type the arguments: the mixin's constructor takes any.
  constructor(message: string, details: EnvdHttpErrorDetails) {
    super(message, details);
  }
}

/** An argument refused before anything was sent (bad metadata, a signature option without a token…). */
export class EnvdArgumentError extends EnvdError {
  /** Always `EnvdArgumentError`. */
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
  const text = await response.text().catch(() => '');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: the text itself is the message.
  }
  const { message, details } = answerFailure(method, path, response.status, response.statusText, body);
  return new EnvdHttpError(message, details);
}

/** Builds the error for a call that got no usable answer. */
export function errorFromFailure(method: string, path: string, err: unknown, callerAborted: boolean): EnvdError {
  if (err instanceof EnvdError) return err;
  const { message, details } = callFailure(method, path, err, callerAborted);
  return new EnvdHttpError(message, details);
}
