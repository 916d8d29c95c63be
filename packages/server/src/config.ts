// Server configuration: explicit options, then PADDOCK_* environment
// variables, then defaults that work on one machine.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

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
  /** Extra host paths hidden from sandboxes. */
  extraMasks: string[];
}

function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}='${raw}' is not a non-negative number`);
  return n;
}

export function resolveConfig(options: Partial<ServerConfig> = {}): ServerConfig {
  const apiPort = options.apiPort ?? num('PADDOCK_API_PORT', 3000);
  const proxyPort = options.proxyPort ?? num('PADDOCK_PROXY_PORT', 3001);
  const config: ServerConfig = {
    home: resolve(options.home ?? process.env.PADDOCK_HOME ?? join(homedir(), '.paddock')),
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
    extraMasks: options.extraMasks ?? (process.env.PADDOCK_EXTRA_MASKS ? process.env.PADDOCK_EXTRA_MASKS.split(':') : []),
  };
  if (config.defaultTimeoutSeconds > config.maxTimeoutSeconds) {
    throw new Error(`the default timeout (${config.defaultTimeoutSeconds} s) is longer than the maximum (${config.maxTimeoutSeconds} s)`);
  }
  return config;
}
