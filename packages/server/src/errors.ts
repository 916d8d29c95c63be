// Errors the control API answers: always `{code, message}`, code = status.
import { RuntimeError } from '@paddock/runtime';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string) => new ApiError(400, message);
export const notFound = (message: string) => new ApiError(404, message);
export const conflict = (message: string) => new ApiError(409, message);

const RUNTIME_STATUS: Record<RuntimeError['kind'], number> = {
  not_found: 404,
  conflict: 409,
  invalid: 400,
  unavailable: 503,
  internal: 500,
};

/** The status and message a failure is answered with. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof RuntimeError) return new ApiError(RUNTIME_STATUS[err.kind], err.message);
  return new ApiError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
}
