// Where the SDK finds the service: options first, then environment
// variables, then the defaults of a local `paddock start`.
import { ENVD_PORT, sandboxHost } from '@paddock/protocol';
import { InvalidArgumentError } from './errors.js';

/** Control API URL used when neither `apiUrl` nor `PADDOCK_API_URL` is set: a local `paddock start`. */
export const DEFAULT_API_URL = 'http://127.0.0.1:3000';
/**
 * Sandbox proxy URL used when neither `sandboxUrl`, `PADDOCK_SANDBOX_URL` nor a domain is set: a local `paddock
 * start`.
 */
export const DEFAULT_SANDBOX_URL = 'http://127.0.0.1:3001';
/** Sandbox domain used when neither `domain` nor `PADDOCK_DOMAIN` is set. */
export const DEFAULT_DOMAIN = 'localhost:3001';
/** Deadline of each request when `requestTimeoutMs` is not given, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** Lifetime asked for on create and guaranteed on connect when no `timeoutMs` is given. */
export const DEFAULT_SANDBOX_TIMEOUT_MS = 300_000;

/** Environment variables read when the matching option is not given. */
export const ENV = {
  apiUrl: 'PADDOCK_API_URL',
  apiKey: 'PADDOCK_API_KEY',
  domain: 'PADDOCK_DOMAIN',
  sandboxUrl: 'PADDOCK_SANDBOX_URL',
  debug: 'PADDOCK_DEBUG',
} as const;

/** Retries of a control API call after a 429, 502 or 503 (and of an idempotent one after a reset connection). */
export const DEFAULT_RETRIES = 3;

/** Where `debug` finds envd when no `sandboxUrl` is given: envd's own port on this machine. */
export const DEBUG_ENVD_URL = `http://localhost:${ENVD_PORT}`;

/**
 * Receives what the SDK logs: each control API call and its outcome at
 * `debug` / `info`, failures at `error`. `console` is one.
 */
export interface Logger {
  /** Each control API call as it is sent. */
  debug?: (...args: unknown[]) => void;
  /** Each control API call that succeeded. */
  info?: (...args: unknown[]) => void;
  /** Unused by the SDK; accepted so that `console` and other loggers fit. */
  warn?: (...args: unknown[]) => void;
  /** Each control API call that failed, with its status or network error. */
  error?: (...args: unknown[]) => void;
}

/** How to reach the service. Every field falls back to its environment variable, then to a default. */
export interface ConnectionOpts {
  /** Sent as `X-API-Key` on control API calls. Default: `PADDOCK_API_KEY`. */
  apiKey?: string;
  /** Base URL of the control API. Default: `PADDOCK_API_URL`, else `http://127.0.0.1:3000`. */
  apiUrl?: string;
  /**
   * Domain of sandbox hosts (`{port}-{sandboxId}.{domain}`). Setting it
   * (option or `PADDOCK_DOMAIN`) without a `sandboxUrl` makes envd calls go
   * to each sandbox's own host instead of the shared sandbox URL. The domain
   * the server reports for a sandbox wins over this one.
   */
  domain?: string;
  /**
   * One URL for the envd of every sandbox, which picks the sandbox from the
   * `E2b-Sandbox-Id` header. Default: `PADDOCK_SANDBOX_URL`, else
   * `http://127.0.0.1:3001` unless a domain is configured. Pointing it at an
   * envd itself works too: envd ignores the routing headers.
   */
  sandboxUrl?: string;
  /** Deadline of each request, in ms; 0 for none. Default 60 000. */
  requestTimeoutMs?: number;
  /**
   * How many times a control API call is sent again after a 429, 502 or 503
   * answer (waiting as `Retry-After` says), or after a reset connection when
   * repeating it is safe; 0 for never. Default 3.
   */
  retries?: number;
  /** Receives the SDK's log lines; nothing is logged without one. */
  logger?: Logger;
  /**
   * Work against one envd with no control API: `Sandbox.create` and
   * `connect` make no API call and give a sandbox `debug_sandbox_id` whose
   * envd is `sandboxUrl` (default `http://localhost:49983`); `kill` and the
   * other lifecycle calls do nothing. Default: `PADDOCK_DEBUG=true`.
   */
  debug?: boolean;
  /** Extra headers on every request, to the control API and to envd. */
  headers?: Record<string, string>;
  /** Extra headers on control API requests only. */
  apiHeaders?: Record<string, string>;
  /** Accepted for code written for E2B's SDK, which no longer checks the key's format either; no effect. */
  validateApiKey?: boolean;
  /**
   * An HTTP(S) proxy that every request goes through, to the control API and
   * to the sandboxes (`http://user:pass@proxy.example:8080`). Node only: a
   * browser goes through its own proxy settings.
   */
  proxy?: string;
}

/** Options of a single request. */
export interface RequestOpts {
  /** Overrides the connection's `requestTimeoutMs` for this call. */
  requestTimeoutMs?: number;
  /** Cancels the call. */
  signal?: AbortSignal;
}

export interface ResolvedConfig {
  apiUrl: string;
  apiKey: string | undefined;
  /** Configured domain; a sandbox's own domain, when the server reports one, comes first. */
  domain: string;
  /** Shared sandbox URL, or undefined when envd is reached on each sandbox's own host. */
  sandboxUrl: string | undefined;
  requestTimeoutMs: number;
  retries: number;
  logger: Logger | undefined;
  debug: boolean;
  /** Headers of envd requests. */
  headers: Record<string, string>;
  /** Headers of control API requests. */
  apiHeaders: Record<string, string>;
  /** HTTP(S) proxy of every request, or undefined to connect directly. */
  proxy: string | undefined;
}

export type Environment = Readonly<Record<string, string | undefined>>;

function processEnv(): Environment {
  // Browsers have no `process`; there every setting comes from options.
  return typeof process === 'undefined' ? {} : process.env;
}

/**
 * A duration option: a whole number of milliseconds, at least 0. Checked
 * before anything is sent, so a mistake names the option instead of coming
 * back as whatever the server makes of it.
 */
export function checkDuration(name: string, value: number | undefined): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be a whole number of milliseconds, 0 or more; got ${String(value)}`);
  }
}

function checkCount(name: string, value: number | undefined): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be a whole number, 0 or more; got ${String(value)}`);
  }
}

function checkProxy(proxy: string | undefined): void {
  if (proxy === undefined) return;
  let url: URL | undefined;
  try {
    url = new URL(proxy);
  } catch {
    // Said below.
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
    throw new InvalidArgumentError(`proxy must be an http:// or https:// URL; got '${String(proxy).replace(/\/\/[^@/]*@/, '//***@')}'`);
  }
}

/**
 * Options bound to a class by an `E2B` client: `Sandbox` and `Template`
 * subclasses whose static calls use them where a call leaves an option out.
 */
const bound = new WeakMap<object, ConnectionOpts>();

/** Binds `opts` to a class (or the `Template` function): its static calls, and its subclasses', start from them. */
export function bindOptions(target: object, opts: ConnectionOpts): void {
  bound.set(target, { ...opts });
}

/**
 * The options of a static call on `target`: the call's own, over those bound
 * to `target` or the nearest class it inherits from. An option the call
 * gives as `undefined` falls back to the bound one.
 */
export function withBoundOptions<T extends ConnectionOpts>(target: object, opts: T | undefined): T {
  let from: object | null = target;
  while (from !== null && !bound.has(from)) from = Object.getPrototypeOf(from) as object | null;
  const defaults = from === null ? undefined : bound.get(from);
  if (!defaults) return opts ?? ({} as T);
  const merged: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(opts ?? {})) if (value !== undefined) merged[key] = value;
  return merged as T;
}

export function resolveConfig(opts: ConnectionOpts = {}, env: Environment = processEnv()): ResolvedConfig {
  checkDuration('requestTimeoutMs', opts.requestTimeoutMs);
  checkCount('retries', opts.retries);
  checkProxy(opts.proxy);
  const fromEnv = (name: string): string | undefined => env[name] || undefined;
  const domain = opts.domain || fromEnv(ENV.domain);
  const debug = opts.debug ?? fromEnv(ENV.debug)?.toLowerCase() === 'true';
  let sandboxUrl: string | undefined;
  // A setting given in code beats one from the environment, so a `domain`
  // option turns off an inherited PADDOCK_SANDBOX_URL.
  if (opts.sandboxUrl) sandboxUrl = opts.sandboxUrl;
  else if (debug) sandboxUrl = DEBUG_ENVD_URL;
  else if (opts.domain) sandboxUrl = undefined;
  else if (fromEnv(ENV.sandboxUrl)) sandboxUrl = fromEnv(ENV.sandboxUrl);
  else if (domain) sandboxUrl = undefined;
  else sandboxUrl = DEFAULT_SANDBOX_URL;
  return {
    apiUrl: opts.apiUrl || fromEnv(ENV.apiUrl) || DEFAULT_API_URL,
    apiKey: opts.apiKey || fromEnv(ENV.apiKey),
    domain: domain ?? DEFAULT_DOMAIN,
    sandboxUrl,
    requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    retries: opts.retries ?? DEFAULT_RETRIES,
    logger: opts.logger,
    debug,
    headers: { ...opts.headers },
    apiHeaders: { ...opts.headers, ...opts.apiHeaders },
    proxy: opts.proxy,
  };
}

/**
 * envd's base URL for one sandbox: the shared sandbox URL, or the sandbox's
 * own host. Plain http is used only under `localhost`, where there is no TLS.
 */
export function envdUrl(config: ResolvedConfig, sandboxId: string, sandboxDomain: string): string {
  if (config.sandboxUrl) return config.sandboxUrl;
  const scheme = isLocalDomain(sandboxDomain) ? 'http' : 'https';
  return `${scheme}://${sandboxHost(ENVD_PORT, sandboxId, sandboxDomain)}`;
}

/** `localhost` or a name under it, with or without a port. */
export function isLocalDomain(domain: string): boolean {
  const host = domain.replace(/:\d+$/, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost');
}
