// Server configuration: explicit options (flags), then PADDOCK_* environment
// variables, then a YAML configuration file, then defaults that work on one
// machine. Every setting is one row of CONFIG_KEYS.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
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
  warmPoolTemplates: string[];
  /** How often each running sandbox's usage is sampled, ms. */
  metricsIntervalMs: number;
  /** How long metric samples and logs of a sandbox are kept, ms. */
  retentionMs: number;
  /** The base template from this image reference; unset: a Debian root filesystem built here with mmdebstrap. */
  baseImage: string | undefined;
  /** Registries (`host:port`) reached over plain HTTP besides those on loopback. */
  insecureRegistries: string[];
  /** The OCI runtime that runs the sandboxes' containers: crun or runc; unset, the runtime chooses (crun where installed). */
  ociRuntime: string | undefined;
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
  /** The web dashboard at /dashboard/ on the API's port. */
  dashboard: boolean;
  /** How long a dashboard session lasts from sign-in, ms. */
  dashboardSessionTtlMs: number;
  /** What the steps of template builds may reach, as a sandbox's allowOut and denyOut; default: the internet. */
  buildAllowOut: string[];
  buildDenyOut: string[];
  /** The least severe log lines written: fatal, error, warn, info (the default), debug, trace, or silent. */
  logLevel: LogLevel;
  /** A file the JSON log lines are appended to; default standard output. */
  logFile: string | undefined;
  /**
   * PEM certificate (chain) and key served by the control API and the proxy
   * over TLS; unset: plain HTTP. One wildcard certificate for `api.{domain}`
   * and `*.{domain}` serves both. Read again on SIGHUP.
   */
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** How long a stopping server lets requests and streams under way finish before it cuts them, ms. */
  shutdownGraceMs: number;
  /** Running sandboxes one API key may have at once; 0: no limit. */
  maxSandboxesPerKey: number;
  /** Creates (and forks) one API key may make a second, on average; 0: no limit. */
  createRate: number;
  /** Creates one API key may make at once above the rate, after a quiet while. */
  createBurst: number;
  /** The configuration file the rest was read from (under options and variables), if any. */
  configFile: string | undefined;
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

/** The part of the configuration that bounds client connections. */
export type ConnectionLimits = Pick<ServerConfig, 'headerTimeoutMs' | 'bodyTimeoutMs' | 'idleTimeoutMs' | 'maxConnectionsPerAddress'>;

type Kind = 'string' | 'path' | 'number' | 'bool' | 'list' | 'level';

/** One setting: its key, its variable, its flag on `paddock start` if it has one, and what it is when none is given. */
export interface ConfigKey {
  key: Exclude<keyof ServerConfig, 'configFile'>;
  env: string;
  flag?: string;
  kind: Kind;
  /** The value when nothing sets it; given what was resolved before it (the domain names the proxy's port). */
  fallback: (resolved: Partial<ServerConfig>) => unknown;
  /** The least a number may be. */
  min?: number;
  /** What the README's table says of it. */
  doc: string;
}

const hours = 3600;

/** Every setting, in the order they are resolved and documented. */
export const CONFIG_KEYS: ConfigKey[] = [
  { key: 'home', env: 'PADDOCK_HOME', flag: '--home', kind: 'path', fallback: () => defaultHome(), doc: 'data directory: the store, templates and sandboxes (root: /var/lib/paddock, else ~/.paddock)' },
  { key: 'apiHost', env: 'PADDOCK_API_HOST', flag: '--api-host', kind: 'string', fallback: () => '127.0.0.1', doc: 'address of the control API' },
  { key: 'apiPort', env: 'PADDOCK_API_PORT', flag: '--api-port', kind: 'number', fallback: () => 3000, doc: 'port of the control API' },
  { key: 'proxyHost', env: 'PADDOCK_PROXY_HOST', flag: '--proxy-host', kind: 'string', fallback: () => '127.0.0.1', doc: 'address of the sandbox proxy' },
  { key: 'proxyPort', env: 'PADDOCK_PROXY_PORT', flag: '--proxy-port', kind: 'number', fallback: () => 3001, doc: 'port of the sandbox proxy' },
  { key: 'domain', env: 'PADDOCK_DOMAIN', flag: '--domain', kind: 'string', fallback: (c) => `localhost:${c.proxyPort}`, doc: 'domain of sandbox hosts, `{port}-{id}.{domain}` (default `localhost:{proxy port}`)' },
  { key: 'defaultTimeoutSeconds', env: 'PADDOCK_DEFAULT_TIMEOUT', kind: 'number', fallback: () => 300, doc: 'lifetime of a sandbox created without a timeout, seconds' },
  { key: 'maxTimeoutSeconds', env: 'PADDOCK_MAX_TIMEOUT', kind: 'number', fallback: () => 24 * hours, doc: 'longest lifetime a client may ask for, seconds' },
  { key: 'warmPoolSize', env: 'PADDOCK_WARM_POOL', flag: '--warm-pool', kind: 'number', fallback: () => 2, doc: 'booted sandboxes kept ready per pooled template (0: none)' },
  { key: 'warmPoolTemplates', env: 'PADDOCK_WARM_POOL_TEMPLATES', flag: '--warm-pool-templates', kind: 'list', fallback: () => ['base', 'code-interpreter-v1'], doc: "templates (names or ids) that get a warm pool, each with its start command running and ready; one not built is skipped until it is" },
  { key: 'metricsIntervalMs', env: 'PADDOCK_METRICS_INTERVAL_MS', kind: 'number', fallback: () => 5000, min: 1, doc: "how often each running sandbox's use is sampled, ms" },
  { key: 'retentionMs', env: 'PADDOCK_RETENTION_MS', kind: 'number', fallback: () => 24 * hours * 1000, doc: 'how long samples, logs and killed sandboxes are kept, ms' },
  { key: 'baseImage', env: 'PADDOCK_BASE_IMAGE', flag: '--base-image', kind: 'string', fallback: () => undefined, doc: 'make the base template from this image instead of Debian built with mmdebstrap' },
  { key: 'insecureRegistries', env: 'PADDOCK_INSECURE_REGISTRIES', flag: '--insecure-registry', kind: 'list', fallback: () => [], doc: 'registries (`host:port`) reached over plain HTTP besides those on loopback' },
  { key: 'ociRuntime', env: 'PADDOCK_OCI_RUNTIME', kind: 'string', fallback: () => undefined, doc: "the OCI runtime that runs the sandboxes' containers: `crun` (the default where installed; starts a container in about a third of runc's CPU time) or `runc`. Unset, a home whose sandboxes run keeps the one they run on" },
  { key: 'imagesDir', env: 'PADDOCK_IMAGES_DIR', kind: 'path', fallback: () => undefined, doc: 'the image store (unpacked layers); default `{home}/runtime/layers`' },
  { key: 'cacheDir', env: 'PADDOCK_CACHE_DIR', kind: 'path', fallback: () => undefined, doc: 'where the built base root filesystem is kept; default `{home}/runtime/cache`' },
  // A head is a few hundred bytes; a request body of the API a few kilobytes.
  { key: 'headerTimeoutMs', env: 'PADDOCK_HEADER_TIMEOUT_MS', kind: 'number', fallback: () => 20_000, min: 1, doc: 'a request head must arrive within this long, ms' },
  { key: 'bodyTimeoutMs', env: 'PADDOCK_BODY_TIMEOUT_MS', kind: 'number', fallback: () => 30_000, min: 1, doc: 'a request body that stops arriving for this long is cut off, ms' },
  // Longer than the keep-alive of common clients and load balancers (60 s), so they close first.
  { key: 'idleTimeoutMs', env: 'PADDOCK_IDLE_TIMEOUT_MS', kind: 'number', fallback: () => 65_000, min: 1, doc: 'an idle kept-alive client connection is closed after this long, ms' },
  // SDK test suites open hundreds of connections at once from 127.0.0.1.
  { key: 'maxConnectionsPerAddress', env: 'PADDOCK_MAX_CONNECTIONS_PER_ADDRESS', kind: 'number', fallback: () => 512, min: 1, doc: 'client connections open at once from one address' },
  { key: 'proxyFastPath', env: 'PADDOCK_PROXY_FAST_PATH', kind: 'bool', fallback: () => true, doc: "the proxy's own HTTP/1.1 relay and kernel pump; off: Node's http server and undici" },
  { key: 'buildConcurrency', env: 'PADDOCK_BUILD_CONCURRENCY', kind: 'number', fallback: () => 1, min: 1, doc: 'template builds run at once; more wait' },
  { key: 'buildTimeoutMs', env: 'PADDOCK_BUILD_TIMEOUT_MS', kind: 'number', fallback: () => 3600_000, doc: 'a build still running after this long fails, ms' },
  { key: 'maxBuildUploadBytes', env: 'PADDOCK_MAX_BUILD_UPLOAD_BYTES', kind: 'number', fallback: () => 1024 ** 3, doc: "the largest archive a build's COPY step may upload, bytes" },
  { key: 'readyTimeoutMs', env: 'PADDOCK_READY_TIMEOUT_MS', kind: 'number', fallback: () => 120_000, doc: "how long a template's ready command may take, ms" },
  { key: 'network', env: 'PADDOCK_NETWORK', flag: '--no-network', kind: 'bool', fallback: () => true, doc: 'each sandbox gets a network of its own; off: loopback only' },
  { key: 'networkName', env: 'PADDOCK_NETWORK_NAME', kind: 'string', fallback: () => undefined, doc: 'the nftables table and prefix of namespaces and veths; default derived from the data directory' },
  { key: 'sandboxSubnet', env: 'PADDOCK_SANDBOX_SUBNET', flag: '--sandbox-subnet', kind: 'string', fallback: () => undefined, doc: "the sandboxes' IPv4 subnet, a /30 each; default a free /20 of 10.208.0.0/12" },
  { key: 'uplink', env: 'PADDOCK_UPLINK', flag: '--uplink', kind: 'string', fallback: () => undefined, doc: 'the interface sandbox traffic leaves by; default that of the default route' },
  { key: 'allowedPrivate', env: 'PADDOCK_ALLOW_PRIVATE', flag: '--allow-private', kind: 'list', fallback: () => [], doc: 'private ranges (CIDR) sandboxes may reach, their rules permitting' },
  { key: 'dns', env: 'PADDOCK_DNS', flag: '--dns', kind: 'list', fallback: () => [], doc: "DNS servers the sandboxes' resolver asks; default the host's" },
  { key: 'maxNetworkRules', env: 'PADDOCK_MAX_NETWORK_RULES', kind: 'number', fallback: () => 512, doc: 'the most entries allowOut and denyOut may each have' },
  { key: 'corsOrigins', env: 'PADDOCK_CORS_ORIGINS', kind: 'list', fallback: () => ['*'], doc: 'origins of web pages that may call the API and envd (CORS); `*` any, empty none' },
  { key: 'dashboard', env: 'PADDOCK_DASHBOARD', kind: 'bool', fallback: () => true, doc: 'the web dashboard at `/dashboard/` on the API port; off: not served, its sign-in refused' },
  { key: 'dashboardSessionTtlMs', env: 'PADDOCK_DASHBOARD_SESSION_TTL_MS', kind: 'number', fallback: () => 12 * hours * 1000, min: 1000, doc: 'how long a dashboard sign-in lasts, ms' },
  { key: 'buildAllowOut', env: 'PADDOCK_BUILD_ALLOW_OUT', kind: 'list', fallback: () => [], doc: 'what build steps may reach, as a sandbox\'s allowOut' },
  { key: 'buildDenyOut', env: 'PADDOCK_BUILD_DENY_OUT', kind: 'list', fallback: () => [], doc: 'what build steps may not reach, as a sandbox\'s denyOut' },
  { key: 'tlsCert', env: 'PADDOCK_TLS_CERT', flag: '--tls-cert', kind: 'path', fallback: () => undefined, doc: 'PEM certificate (chain) the API and the proxy serve over TLS; with `tls-key`; read again on SIGHUP' },
  { key: 'tlsKey', env: 'PADDOCK_TLS_KEY', flag: '--tls-key', kind: 'path', fallback: () => undefined, doc: "the certificate's PEM private key" },
  { key: 'shutdownGraceMs', env: 'PADDOCK_SHUTDOWN_GRACE_MS', kind: 'number', fallback: () => 10_000, doc: 'how long a stopping server lets requests and streams under way finish before it cuts them, ms' },
  { key: 'maxSandboxesPerKey', env: 'PADDOCK_MAX_SANDBOXES_PER_KEY', kind: 'number', fallback: () => 0, doc: 'running sandboxes one API key may have at once (429 beyond); 0: no limit' },
  { key: 'createRate', env: 'PADDOCK_CREATE_RATE', kind: 'number', fallback: () => 0, doc: 'creates and forks per second one API key may make (429 with Retry-After beyond); 0: no limit' },
  { key: 'createBurst', env: 'PADDOCK_CREATE_BURST', kind: 'number', fallback: (c) => Math.max(1, Math.ceil(c.createRate ?? 0)), min: 1, doc: 'creates one API key may make at once above the rate (default: the rate, at least 1)' },
  { key: 'logLevel', env: 'PADDOCK_LOG_LEVEL', flag: '--log-level', kind: 'level', fallback: () => 'info', doc: `the least severe log lines written: ${LOG_LEVELS.join(', ')}` },
  { key: 'logFile', env: 'PADDOCK_LOG_FILE', kind: 'path', fallback: () => undefined, doc: 'a file the JSON log lines are appended to; default standard output' },
];

/** A setting's key in the configuration file: its flag's name (`warm-pool`, `network`), else its key in kebab case (`max-network-rules`). */
export const fileKey = (spec: ConfigKey) => (spec.flag ? spec.flag.replace(/^--(no-)?/, '') : spec.key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));

export type ConfigSource = 'option' | 'env' | 'file' | 'default';

export interface ExplainedConfig {
  config: ServerConfig;
  /** Where each key's value came from. */
  sources: Record<keyof ServerConfig, ConfigSource>;
}

/** A value as a setting of its kind; `where` quotes it where it was read, `origin` names that place, for the errors. */
function parse(spec: ConfigKey, raw: unknown, where: string, origin: string): unknown {
  const text = typeof raw === 'string' ? raw.trim() : raw;
  switch (spec.kind) {
    case 'string':
      if (typeof text !== 'string') throw new Error(`${where} is not a string`);
      return text === '' ? undefined : text;
    case 'path':
      if (typeof text !== 'string') throw new Error(`${where} is not a path`);
      return text === '' ? undefined : resolve(text);
    case 'number': {
      const n = typeof text === 'number' ? text : typeof text === 'string' && text !== '' ? Number(text) : NaN;
      if (!Number.isFinite(n) || n < 0) throw new Error(`${where} is not a non-negative number`);
      if (spec.min !== undefined && n < spec.min) throw new Error(`${spec.key} (${origin}) is ${n}; it must be at least ${spec.min}`);
      return n;
    }
    case 'bool': {
      if (typeof text === 'boolean') return text;
      const t = typeof text === 'string' ? text.toLowerCase() : '';
      if (['1', 'true', 'on', 'yes'].includes(t)) return true;
      if (['0', 'false', 'off', 'no'].includes(t)) return false;
      throw new Error(`${where} is neither on (1, true, on) nor off (0, false, off)`);
    }
    case 'list': {
      if (Array.isArray(text) && text.every((e) => typeof e === 'string')) return text.map((e) => e.trim()).filter(Boolean);
      if (typeof text === 'string') return text.split(',').map((e) => e.trim()).filter(Boolean);
      throw new Error(`${where} is not a list of strings (a YAML list, or one string of comma-separated entries)`);
    }
    case 'level': {
      const level = typeof text === 'string' ? text.toLowerCase() : '';
      if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`${where} is not one of ${LOG_LEVELS.join(', ')}`);
      return level;
    }
  }
}

/** The settings of a configuration file: a YAML mapping of the keys in CONFIG_KEYS, spelled as fileKey() does. */
export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`the configuration file ${file} cannot be read: ${(err as Error).message}`, { cause: err });
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new Error(`the configuration file ${file} is not valid YAML: ${(err as Error).message}`, { cause: err });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`the configuration file ${file} must be a mapping of keys to values`);
  const known = new Map(CONFIG_KEYS.map((k) => [fileKey(k), k.key]));
  const settings: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(doc)) {
    const key = known.get(name);
    if (!key) throw new Error(`the configuration file ${file} has an unknown key '${name}'; the keys are ${[...known.keys()].join(', ')}`);
    settings[key] = value;
  }
  return settings;
}

/**
 * The configuration, and where each value came from. Precedence, highest
 * first: the options given (a flag of `paddock start`), PADDOCK_* variables,
 * the configuration file (`configFile`, else $PADDOCK_CONFIG), defaults. A
 * bad value is refused naming its key and where it was set.
 */
export function explainServerConfig(options: Partial<ServerConfig> = {}): ExplainedConfig {
  const configFile = options.configFile ?? (process.env.PADDOCK_CONFIG ? resolve(process.env.PADDOCK_CONFIG) : undefined);
  const fromFile = configFile ? readConfigFile(configFile) : {};
  const resolved: Partial<ServerConfig> = {};
  const sources = { configFile: options.configFile ? 'option' : configFile ? 'env' : 'default' } as Record<keyof ServerConfig, ConfigSource>;
  for (const spec of CONFIG_KEYS) {
    const given = options[spec.key];
    const env = process.env[spec.env];
    let value: unknown;
    let source: ConfigSource;
    if (given !== undefined) {
      value = parse(spec, given, `${spec.key} ${JSON.stringify(given)}`, 'option');
      source = 'option';
    } else if (env !== undefined && (env !== '' || spec.key === 'corsOrigins')) {
      // An empty variable is unset, but for the CORS origins, where it means none.
      value = parse(spec, env, spec.kind === 'level' ? `${spec.key} (${spec.env}) '${env}'` : `${spec.env}='${env}'`, spec.env);
      source = 'env';
    } else if (fromFile[spec.key] !== undefined && fromFile[spec.key] !== null) {
      value = parse(spec, fromFile[spec.key], `${fileKey(spec)}: ${JSON.stringify(fromFile[spec.key])} in ${configFile}`, `${fileKey(spec)} in ${configFile}`);
      source = 'file';
    } else {
      value = spec.fallback(resolved);
      source = 'default';
    }
    (resolved as Record<string, unknown>)[spec.key] = value;
    sources[spec.key] = source;
  }
  const config = { ...resolved, configFile } as ServerConfig;
  if ((config.tlsCert === undefined) !== (config.tlsKey === undefined)) {
    throw new Error(`TLS needs both a certificate and its key: tlsCert (PADDOCK_TLS_CERT) is ${config.tlsCert ?? 'unset'}, tlsKey (PADDOCK_TLS_KEY) is ${config.tlsKey ?? 'unset'}`);
  }
  if (config.defaultTimeoutSeconds > config.maxTimeoutSeconds) {
    throw new Error(`the default timeout (${config.defaultTimeoutSeconds} s) is longer than the maximum (${config.maxTimeoutSeconds} s)`);
  }
  return { config, sources };
}

export function resolveServerConfig(options: Partial<ServerConfig> = {}): ServerConfig {
  return explainServerConfig(options).config;
}

/** The README's table of settings, made from CONFIG_KEYS (a test holds the README to it). */
export function configTable(): string {
  const rows = CONFIG_KEYS.map((k) => `| \`${fileKey(k)}\` | \`${k.env}\` | ${k.flag ? `\`${k.flag}\`` : ''} | ${k.doc} |`);
  return ['| file key | variable | flag | what it sets |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
