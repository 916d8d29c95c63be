// Server configuration: explicit options, then PADDOCK_* environment
// variables, then defaults that work on one machine.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { LOG_LEVELS, type LogLevel } from './log.js';

export interface ServerConfig {
  /** Data directory: the SQLite file, the runtime's templates and sandboxes. */
  home: string;
  /** Control API address. */
  apiHost: string;
  apiPort: number;
  /** Sandbox proxy address. */
  proxyHost: string;
  proxyPort: number;
  /**
   * Domain of sandbox hosts: `{port}-{sandboxID}.{domain}` reaches a port of
   * a sandbox through the proxy. Returned to clients in create/connect.
   */
  domain: string;
  /** Lifetime of a sandbox created without a timeout, seconds. */
  defaultTimeoutSeconds: number;
  /** Longest lifetime a client may ask for, seconds. */
  maxTimeoutSeconds: number;
  warmPoolSize: number;
  /** How often each running sandbox's usage is sampled, ms. */
  metricsIntervalMs: number;
  /** How long metric samples and logs of a sandbox are kept, ms. */
  retentionMs: number;
  /** The base template from this image reference; unset: a Debian root filesystem built here with mmdebstrap. */
  baseImage: string | undefined;
  /** Registries (`host:port`) reached over plain HTTP besides those on loopback. */
  insecureRegistries: string[];
  /** The image store (unpacked layers); default `<home>/runtime/layers`. */
  imagesDir: string | undefined;
  /** Where the built base root filesystem is kept; default `<home>/runtime/cache`. */
  cacheDir: string | undefined;
  // Limits on client connections, the same on the control API and the sandbox
  // proxy, so that clients that stall cannot hold the server's descriptors.
  /**
   * A request head must arrive whole within this long, ms: of its first byte,
   * or of the connection's opening for a connection's first request.
   */
  headerTimeoutMs: number;
  /**
   * A request body that stops arriving is cut off, ms. On the proxy, after
   * this long without a byte of it: uploads may be large and streamed. On the
   * API, whose bodies are small JSON, once the whole request has taken longer
   * than the header timeout and this together. Only receiving the request is
   * timed: an answer (a fork, a process's output) takes as long as it takes.
   */
  bodyTimeoutMs: number;
  /** A kept-alive client connection with no request under way is closed after this long, ms. */
  idleTimeoutMs: number;
  /** Client connections open at once from one address; one more is closed as it opens. */
  maxConnectionsPerAddress: number;
  /**
   * The sandbox proxy moves bodies through its fast path (its own HTTP/1.1
   * reader and a kernel pump) rather than Node's http server and undici.
   */
  proxyFastPath: boolean;
  /** Template builds run at once; more wait in a queue. */
  buildConcurrency: number;
  /** A build still running after this long fails, ms. */
  buildTimeoutMs: number;
  /** The largest archive of a build's COPY step a client may upload, bytes. */
  maxBuildUploadBytes: number;
  /** How long a template's ready command may take to succeed, at a build and at each create, ms. */
  readyTimeoutMs: number;
  /** Whether each sandbox gets a network of its own, routed out under its egress rules; off: loopback only. */
  network: boolean;
  /** The nftables table and prefix of network namespaces and veths; default one derived from the data directory. */
  networkName: string | undefined;
  /** The sandboxes' IPv4 subnet (one /30 each); default a free /20 of 10.208.0.0/12, kept across restarts. */
  sandboxSubnet: string | undefined;
  /** The interface sandbox traffic goes out of (masqueraded); default that of the default route. */
  uplink: string | undefined;
  /** Private or special ranges (CIDR) sandboxes may reach, their rules permitting: on-premises services. */
  allowedPrivate: string[];
  /** DNS servers the sandboxes' resolver asks; default the host's. */
  dns: string[];
  /** The most entries allowOut and denyOut may each have. */
  maxNetworkRules: number;
  /**
   * Origins of web pages whose scripts may call the control API and envd
   * through the proxy (CORS); `*`, the default as at E2B, is any. Empty: none.
   */
  corsOrigins: string[];
  /** What the steps of template builds may reach, as a sandbox's allowOut and denyOut; default: the internet. */
  buildAllowOut: string[];
  buildDenyOut: string[];
  /** The least severe log lines written: fatal, error, warn, info (the default), debug, trace, or silent. */
  logLevel: LogLevel;
  /** A file the JSON log lines are appended to; default standard output. */
  logFile: string | undefined;
}

/**
 * `$PADDOCK_HOME`, else the data directory of this user: for root
 * /var/lib/paddock, since runc sets sandboxes up as their own (unprivileged)
 * root, which must pass down into it, and /root lets nobody pass. A
 * `~/.paddock` made by an older Paddock stays in use (prepare() says what
 * to do if sandboxes cannot reach it).
 */
export function defaultHome(): string {
  if (process.env.PADDOCK_HOME) return resolve(process.env.PADDOCK_HOME);
  const own = join(homedir(), '.paddock');
  return process.getuid?.() === 0 && !existsSync(own) ? '/var/lib/paddock' : own;
}

function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}='${raw}' is not a non-negative number`);
  return n;
}

/** A comma-separated list; empty when unset. */
function list(name: string): string[] {
  return (process.env[name] ?? '').split(',').map((e) => e.trim()).filter(Boolean);
}

function flag(name: string, fallback: boolean): boolean {
  const raw = process.env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'on'].includes(raw)) return true;
  if (['0', 'false', 'off'].includes(raw)) return false;
  throw new Error(`${name}='${process.env[name]}' is neither on (1, true, on) nor off (0, false, off)`);
}

function logLevel(raw: string): LogLevel {
  const level = raw.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`logLevel (PADDOCK_LOG_LEVEL) '${raw}' is not one of ${LOG_LEVELS.join(', ')}`);
  return level as LogLevel;
}

/** The part of the configuration that bounds client connections. */
export type ConnectionLimits = Pick<ServerConfig, 'headerTimeoutMs' | 'bodyTimeoutMs' | 'idleTimeoutMs' | 'maxConnectionsPerAddress'>;

/** A limit on client connections: the option, else the variable, else the default. 0 would not mean "none" everywhere. */
function limit(name: keyof ConnectionLimits, given: number | undefined, variable: string, fallback: number): number {
  const n = given ?? num(variable, fallback);
  if (!(n >= 1)) throw new Error(`${name} (${variable}) is ${n}; it must be at least 1`);
  return n;
}

export function resolveServerConfig(options: Partial<ServerConfig> = {}): ServerConfig {
  const apiPort = options.apiPort ?? num('PADDOCK_API_PORT', 3000);
  const proxyPort = options.proxyPort ?? num('PADDOCK_PROXY_PORT', 3001);
  const config: ServerConfig = {
    home: resolve(options.home ?? defaultHome()),
    apiHost: options.apiHost ?? process.env.PADDOCK_API_HOST ?? '127.0.0.1',
    apiPort,
    proxyHost: options.proxyHost ?? process.env.PADDOCK_PROXY_HOST ?? '127.0.0.1',
    proxyPort,
    domain: options.domain ?? process.env.PADDOCK_DOMAIN ?? `localhost:${proxyPort}`,
    defaultTimeoutSeconds: options.defaultTimeoutSeconds ?? num('PADDOCK_DEFAULT_TIMEOUT', 300),
    maxTimeoutSeconds: options.maxTimeoutSeconds ?? num('PADDOCK_MAX_TIMEOUT', 24 * 3600),
    warmPoolSize: options.warmPoolSize ?? num('PADDOCK_WARM_POOL', 2),
    metricsIntervalMs: options.metricsIntervalMs ?? num('PADDOCK_METRICS_INTERVAL_MS', 5000),
    retentionMs: options.retentionMs ?? num('PADDOCK_RETENTION_MS', 24 * 3600 * 1000),
    baseImage: options.baseImage ?? (process.env.PADDOCK_BASE_IMAGE || undefined),
    insecureRegistries: options.insecureRegistries ?? list('PADDOCK_INSECURE_REGISTRIES'),
    imagesDir: options.imagesDir ?? (process.env.PADDOCK_IMAGES_DIR ? resolve(process.env.PADDOCK_IMAGES_DIR) : undefined),
    cacheDir: options.cacheDir ?? (process.env.PADDOCK_CACHE_DIR ? resolve(process.env.PADDOCK_CACHE_DIR) : undefined),
    // A head is a few hundred bytes; a request body of the API a few kilobytes.
    headerTimeoutMs: limit('headerTimeoutMs', options.headerTimeoutMs, 'PADDOCK_HEADER_TIMEOUT_MS', 20_000),
    bodyTimeoutMs: limit('bodyTimeoutMs', options.bodyTimeoutMs, 'PADDOCK_BODY_TIMEOUT_MS', 30_000),
    // Longer than the keep-alive of common clients and load balancers (60 s), so they close first.
    idleTimeoutMs: limit('idleTimeoutMs', options.idleTimeoutMs, 'PADDOCK_IDLE_TIMEOUT_MS', 65_000),
    // SDK test suites open hundreds of connections at once from 127.0.0.1.
    maxConnectionsPerAddress: limit('maxConnectionsPerAddress', options.maxConnectionsPerAddress, 'PADDOCK_MAX_CONNECTIONS_PER_ADDRESS', 512),
    proxyFastPath: options.proxyFastPath ?? flag('PADDOCK_PROXY_FAST_PATH', true),
    buildConcurrency: Math.max(1, options.buildConcurrency ?? num('PADDOCK_BUILD_CONCURRENCY', 1)),
    buildTimeoutMs: options.buildTimeoutMs ?? num('PADDOCK_BUILD_TIMEOUT_MS', 3600_000),
    maxBuildUploadBytes: options.maxBuildUploadBytes ?? num('PADDOCK_MAX_BUILD_UPLOAD_BYTES', 1024 ** 3),
    readyTimeoutMs: options.readyTimeoutMs ?? num('PADDOCK_READY_TIMEOUT_MS', 120_000),
    network: options.network ?? flag('PADDOCK_NETWORK', true),
    networkName: options.networkName ?? (process.env.PADDOCK_NETWORK_NAME || undefined),
    sandboxSubnet: options.sandboxSubnet ?? (process.env.PADDOCK_SANDBOX_SUBNET || undefined),
    uplink: options.uplink ?? (process.env.PADDOCK_UPLINK || undefined),
    allowedPrivate: options.allowedPrivate ?? list('PADDOCK_ALLOW_PRIVATE'),
    dns: options.dns ?? list('PADDOCK_DNS'),
    maxNetworkRules: options.maxNetworkRules ?? num('PADDOCK_MAX_NETWORK_RULES', 512),
    corsOrigins: options.corsOrigins ?? (process.env.PADDOCK_CORS_ORIGINS === undefined ? ['*'] : list('PADDOCK_CORS_ORIGINS')),
    buildAllowOut: options.buildAllowOut ?? list('PADDOCK_BUILD_ALLOW_OUT'),
    buildDenyOut: options.buildDenyOut ?? list('PADDOCK_BUILD_DENY_OUT'),
    logLevel: logLevel(options.logLevel ?? (process.env.PADDOCK_LOG_LEVEL || 'info')),
    logFile: options.logFile ?? (process.env.PADDOCK_LOG_FILE ? resolve(process.env.PADDOCK_LOG_FILE) : undefined),
  };
  if (config.defaultTimeoutSeconds > config.maxTimeoutSeconds) {
    throw new Error(`the default timeout (${config.defaultTimeoutSeconds} s) is longer than the maximum (${config.maxTimeoutSeconds} s)`);
  }
  return config;
}
