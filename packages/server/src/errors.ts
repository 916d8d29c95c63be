// The one conversion of failures into what the control API answers: a
// status and an `Error` body `{code, message}` whose code repeats the status.
// A client's mistake is a 4xx whose message names what was wrong.
import { RuntimeError } from '@paddock/runtime';
import { StoreError } from './store/repositories.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Fields of the answer besides the body: `Retry-After` of a 429. */
    readonly headers: Record<string, string> = {},
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

const STORE_STATUS: Record<StoreError['kind'], number> = { not_found: 404, conflict: 409 };

/** An error of fastify's own: a request it refused (validation names the field), or a 4xx it chose. */
function fastifyStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  if ('validation' in err && err.validation) return 400;
  const status = (err as { statusCode?: unknown }).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}

/** The status and message a failure is answered with; anything not known to be the client's is a 500. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof StoreError) return new ApiError(STORE_STATUS[err.kind], err.message);
  if (err instanceof RuntimeError) return new ApiError(RUNTIME_STATUS[err.kind], err.message);
  const status = fastifyStatus(err);
  if (status !== undefined) return new ApiError(status, (err as Error).message);
  return new ApiError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
}

/** The `Error` body of a failure. */
export const errorBody = (e: ApiError) => ({ code: e.status, message: e.message });
