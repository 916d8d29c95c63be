import { asErrorLike } from '@paddock/protocol';
import { retryAfterSeconds } from './errors.js';

/** When and how often a failed request is sent again. */
export interface RetryPolicy {
  /** Attempts after the first one; 0 turns retries off. */
  maxRetries: number;
  /** Upper bound of the first backoff; it doubles with every retry. */
  initialDelayMs: number;
  /** Upper bound of any backoff. */
  maxDelayMs: number;
  /** Answers worth another try. */
  statuses: readonly number[];
}

/** The retry policy of a client whose options give none, or only some fields. */
export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 3,
  initialDelayMs: 200,
  maxDelayMs: 5_000,
  statuses: Object.freeze([429, 502, 503]),
});

/** Methods whose repetition has no extra effect (RFC 9110 §9.2.2). */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** Socket-level failures after which the server cannot have acted twice on a repeated idempotent request. */
const CONNECTION_ERROR_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET']);

/**
 * Backoff before retry number `retry` (0-based): exponential, capped, with
 * "equal jitter" (half fixed, half random) so that clients that failed
 * together do not come back together, yet never retry at once.
 */
export function backoffDelay(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** retry);
  return ceiling / 2 + (random() * ceiling) / 2;
}

/** Whether `err` (a fetch rejection) means the connection failed rather than the caller or a timeout stopping it. */
export function isConnectionFailure(err: unknown): boolean {
  for (let e = asErrorLike(err), depth = 0; e && depth < 5; e = asErrorLike(e.cause), depth++) {
    if (e.name === 'AbortError' || e.name === 'TimeoutError') return false;
    if (e.code !== undefined && CONNECTION_ERROR_CODES.has(e.code)) return true;
    if (/other side closed/i.test(e.message)) return true;
  }
  return false;
}

/**
 * openapi-fetch turns every body into a stream before the transport sees
 * it, so whether a request can be sent twice is only known where the Request
 * is built: openapi-fetch builds it with this class.
 */
export class ReplayableRequest extends Request {
  readonly replayable: boolean;

  constructor(input: Request | string | URL, init?: RequestInit) {
    super(input, init);
    const body = init?.body;
    this.replayable =
      body === undefined ||
      body === null ||
      typeof body === 'string' ||
      body instanceof ArrayBuffer ||
      ArrayBuffer.isView(body) ||
      body instanceof Blob ||
      body instanceof URLSearchParams ||
      body instanceof FormData;
  }
}

function canReplay(request: Request): boolean {
  return request.body === null || (request instanceof ReplayableRequest && request.replayable);
}

/** A `fetch` that takes a `Request`. */
export type FetchFunction = (input: Request, init?: RequestInit) => Promise<Response>;

export interface SendOptions {
  fetch: FetchFunction;
  policy: RetryPolicy;
  /** Retry even though the method is not idempotent (the operation is, e.g. setting an absolute timeout). */
  idempotent: boolean;
  /** Deadline of the whole call, retries and body included; 0 for none. */
  timeoutMs: number;
  /** Client-wide signal, combined with the request's own. */
  signal: AbortSignal | undefined;
  /** Time, waiting and jitter; the real ones unless a test drives them. */
  clock?: RetryClock;
}

/** Where sendWithRetries reads the time, waits out a backoff, and draws its jitter. */
export interface RetryClock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
}

const realClock: RetryClock = { now: () => Date.now(), sleep, random: Math.random };

/**
 * Sends `request`, retrying per `policy`, within one deadline. Rejections are
 * left as fetch produced them (or the abort reason); the caller classifies
 * them. A retryable answer that is not retried (out of attempts or time) is
 * returned as is.
 */
export async function sendWithRetries(request: Request, options: SendOptions): Promise<Response> {
  const { policy } = options;
  const clock = options.clock ?? realClock;
  const signals = [request.signal];
  if (options.signal) signals.push(options.signal);
  if (options.timeoutMs > 0) signals.push(AbortSignal.timeout(options.timeoutMs));
  const signal = AbortSignal.any(signals);
  const deadline = options.timeoutMs > 0 ? clock.now() + options.timeoutMs : Number.POSITIVE_INFINITY;
  const retryable =
    policy.maxRetries > 0 && (options.idempotent || IDEMPOTENT_METHODS.has(request.method)) && canReplay(request);

  for (let attempt = 0; ; attempt++) {
    const lastAttempt = !retryable || attempt >= policy.maxRetries;
    // Every attempt but the last sends a copy, so the original body is still unread for the next one.
    const outgoing = lastAttempt ? request : request.clone();
    let response: Response;
    try {
      response = await options.fetch(outgoing, { signal });
    } catch (err) {
      if (lastAttempt || signal.aborted || !isConnectionFailure(err)) throw err;
      const delay = backoffDelay(attempt, policy, clock.random);
      if (clock.now() + delay >= deadline) throw err;
      await clock.sleep(delay, signal);
      continue;
    }
    if (lastAttempt || !policy.statuses.includes(response.status)) return response;
    const retryAfter = retryAfterSeconds(response.headers);
    const delay = retryAfter !== undefined ? retryAfter * 1000 : backoffDelay(attempt, policy, clock.random);
    if (clock.now() + delay >= deadline) return response;
    // Release the connection: the body of an answer we retry is never read.
    await response.body?.cancel().catch(() => undefined);
    await clock.sleep(delay, signal);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
