import { createContextKey, createContextValues, type CallOptions, type Interceptor } from '@connectrpc/connect';
import { ENVD_PORT } from '@paddock/protocol';

export { ENVD_PORT };
/** Seconds between keepalive events that server streams ask envd for, as the e2b SDK does. */
export const DEFAULT_KEEPALIVE_PING_INTERVAL_SEC = 50;

/** Everything that decides the headers of a request to envd. */
export interface EnvdHeaderConfig {
  /** Sent as `X-Access-Token`. */
  accessToken?: string | undefined;
  /**
   * Sent as `E2b-Sandbox-Id`, with `E2b-Sandbox-Port`, so that one shared
   * sandbox URL can route the request to this sandbox.
   */
  sandboxId?: string | undefined;
  /** `E2b-Sandbox-Port`; default 49983 (envd). */
  sandboxPort?: number | undefined;
  /** User of RPCs that do not choose one; sent as `Authorization: Basic`. */
  user?: string | undefined;
  /** `Keepalive-Ping-Interval` on server streams; 0 leaves it out. Default 50. */
  keepalivePingIntervalSec?: number | undefined;
  /** Extra headers on every request. */
  headers?: Record<string, string> | undefined;
}

/** The user an RPC acts as, set per call with `withUser`. */
export const envdUserKey = createContextKey<string | undefined>(undefined, { description: 'envd user' });

/**
 * Call options that make one RPC act as `user` (overriding the client's
 * default user). Given options are kept; their `contextValues`, if any, get
 * the user set on them.
 */
export function withUser(user: string, options: CallOptions = {}): CallOptions {
  const contextValues = options.contextValues ?? createContextValues();
  contextValues.set(envdUserKey, user);
  return { ...options, contextValues };
}

/** `Authorization` value that selects `user` in envd: Basic with the user name and an empty password. */
export function basicAuthorization(user: string): string {
  return `Basic ${base64(new TextEncoder().encode(`${user}:`))}`;
}

/**
 * Headers of every request to envd, RPC and HTTP alike: token, sandbox
 * routing and the caller's extras. The user is not among them: RPCs carry it
 * as `Authorization`, `/files` as the `username` query parameter.
 */
export function connectionHeaders(config: EnvdHeaderConfig): Record<string, string> {
  const headers: Record<string, string> = { ...config.headers };
  if (config.accessToken !== undefined) headers['X-Access-Token'] = config.accessToken;
  if (config.sandboxId !== undefined) {
    headers['E2b-Sandbox-Id'] = config.sandboxId;
    headers['E2b-Sandbox-Port'] = String(config.sandboxPort ?? ENVD_PORT);
  }
  return headers;
}

/** Adds envd's headers to every RPC of a transport. */
export function envdInterceptor(config: EnvdHeaderConfig): Interceptor {
  const fixed = connectionHeaders(config);
  const keepalive = config.keepalivePingIntervalSec ?? DEFAULT_KEEPALIVE_PING_INTERVAL_SEC;
  return (next) => (req) => {
    for (const [name, value] of Object.entries(fixed)) req.header.set(name, value);
    const user = req.contextValues.get(envdUserKey) ?? config.user;
    if (user !== undefined) req.header.set('Authorization', basicAuthorization(user));
    // Keepalive events keep idle streams (a quiet process, a watched directory) alive through proxies.
    if (keepalive > 0 && req.method.methodKind === 'server_streaming') {
      req.header.set('Keepalive-Ping-Interval', String(keepalive));
    }
    return next(req);
  };
}

/** Standard base64 of bytes, without Node's Buffer so it runs in browsers too. */
export function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}
