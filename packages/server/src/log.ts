// The server's log: JSON lines through pino (fastify's own logger), one
// line per request answered and per event of a sandbox's or a build's life.
// A request's id is on every line written while it is handled, however deep
// the call that writes it: the logger of the request under way is kept in
// an AsyncLocalStorage, so the sandbox service and the builder need no
// logger passed down each call.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { pino, type DestinationStream } from 'pino';
import type { RuntimeLog } from '@paddock/runtime';

/** A logger as the server's parts use it: pino's, as fastify types it (its requests' loggers are children of it). */
export type Logger = FastifyBaseLogger;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Fields blanked whatever a caller puts in them. No line is meant to hold a
 * secret; this is the net under that: a record or request logged whole
 * still shows no key, token or signature.
 */
const SECRET_FIELDS = [
  'apiKey',
  'key',
  'token',
  'accessToken',
  'envdAccessToken',
  'trafficAccessToken',
  'signature',
  'password',
  'authorization',
  'headers["x-api-key"]',
  'headers["x-access-token"]',
  'headers["e2b-traffic-access-token"]',
  'headers.authorization',
  'headers.cookie',
];

export interface LoggerOptions {
  level: LogLevel;
  /** Where lines go: a stream (a pretty printer, a test's capture), a file path, a file descriptor; default standard output. */
  destination?: DestinationStream | string | number;
}

export function createLogger({ level, destination }: LoggerOptions): Logger {
  const to =
    typeof destination === 'string' || typeof destination === 'number' || destination === undefined
      ? pino.destination({ dest: destination ?? 1, mkdir: typeof destination === 'string', sync: true })
      : destination;
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]), censor: '[redacted]' },
    },
    to,
  );
}

const scope = new AsyncLocalStorage<Logger>();

/** Runs `fn` with `log` as the logger of everything it does, awaited calls included. */
export function withLog<T>(log: Logger, fn: () => T): T {
  return scope.run(log, fn);
}

/** The logger of the request under way (its id on each line), or `base` outside one. */
export function logOf(base: Logger): Logger {
  return scope.getStore() ?? base;
}

/**
 * A logger for a part of the server (`component` on each line) that writes
 * through the request under way when there is one, so that what the part
 * does for a request carries the request's id.
 */
export function componentLog(base: Logger, component: string): RuntimeLog {
  const line =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (fields: Record<string, unknown>, message: string): void =>
      logOf(base)[level]({ component, ...fields }, message);
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request's id: the client's `X-Request-Id` when it is a plain token (so
 * a caller can find its own request in the log), else a new one.
 */
export function requestId(header: string | string[] | undefined): string {
  const given = Array.isArray(header) ? header[0] : header;
  return given !== undefined && CLIENT_REQUEST_ID.test(given) ? given : randomUUID();
}

/** A request's target for a log line: its path, never its query (signed URLs carry their signature there). */
export function pathOf(url: string | undefined): string {
  const path = (url ?? '').split('?')[0]!;
  return path.length > 256 ? `${path.slice(0, 256)}…` : path;
}
