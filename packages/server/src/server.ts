// Starts a whole Paddock server: store, runtime, control API and proxy.
import { DEFAULT_ID_SHIFT, RuncRuntime, isWarmPool, sandboxPassable, type OciRuntimeName, type Runtime } from '@paddock/runtime';
import { mkdirSync } from 'node:fs';
import type { AddressInfo, Server } from 'node:net';
import { join } from 'node:path';
import { createApi } from './api.js';
import { Authenticator, keyResolver } from './auth.js';
import { Builder } from './builds/builder.js';
import { WarmPoolPlan } from './warm-pool.js';
import { BuildFiles } from './builds/build-files.js';
import { lockHome } from './home-lock.js';
import { resolveServerConfig, type ServerConfig } from './config.js';
import { loadOperations } from './openapi.js';
import { createProxy } from './proxy.js';
import { Sandboxes } from './sandboxes.js';
import { DEFAULT_TEAM_NAME, type ApiKeyRepository } from './store/repositories.js';
import { openSqliteStore } from './store/sqlite.js';
import { componentLog, createLogger, type Logger } from './log.js';
import { Metrics } from './metrics.js';
import { Health } from './health.js';
import { readTls, type SecureServer } from './tls.js';
import { validateEgress } from './network.js';
import { Templates } from './templates.js';
import { dashboardAssets } from './dashboard/assets.js';
import { DashboardApi } from './dashboard/session-api.js';

export interface StartOptions extends Partial<ServerConfig> {
  /** A runtime to use instead of a RuncRuntime on `<home>/runtime`. */
  runtime?: Runtime;
  /** The API key to create when the store has none (default: a new random one). */
  initialApiKey?: string;
  /** The admin credential to create when the store has none (default: a new random one). */
  initialAdminKey?: string;
  onProgress?: (message: string) => void;
  /** Where the server logs; default JSON lines at `logLevel` to `logFile` or standard output. */
  logger?: Logger;
}

export interface PaddockServer {
  config: ServerConfig;
  apiUrl: string;
  proxyUrl: string;
  /** The API key created by this start, when the store had none; shown once. */
  createdApiKey?: string;
  /** The admin credential created by this start, when the store had none; shown once. */
  createdAdminKey?: string;
  keys: ApiKeyRepository;
  /**
   * Turns a request's credential into its caller, for the control API and
   * the sandbox proxy; another kind of credential (a session cookie) is
   * added to it with `auth.add`.
   */
  auth: Authenticator;
  runtime: Runtime;
  log: Logger;
  metrics: Metrics;
  /**
   * Reads the TLS certificate and key again and serves them to new
   * connections (`paddock start` calls it on SIGHUP). Throws, keeping the
   * one served, when they cannot be read or do not make a pair.
   */
  reloadTls(): void;
  /** Stops serving; sandboxes keep running for the next start. */
  close(): Promise<void>;
}

function listen(server: Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`${host}:${port} is already in use; choose another port`) : err),
    );
    server.listen(port, host, () => resolve(server.address() as AddressInfo));
  });
}

/** The operator's rules for build containers, checked as a sandbox's are. */
function buildNetwork(config: ServerConfig): { allowOut?: string[]; denyOut?: string[] } {
  try {
    return {
      allowOut: validateEgress('allowOut', config.buildAllowOut, config.maxNetworkRules),
      denyOut: validateEgress('denyOut', config.buildDenyOut, config.maxNetworkRules),
    };
  } catch (err) {
    throw new Error(`the build network rules (PADDOCK_BUILD_ALLOW_OUT, PADDOCK_BUILD_DENY_OUT): ${(err as Error).message}`, { cause: err });
  }
}

const urlOf = (a: AddressInfo, secure: boolean) => `${secure ? 'https' : 'http'}://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;

/** What a stream still under way when the server stops is told as it is ended. */
const STOPPING_REASON = 'the Paddock server is stopping, and this stream ends here; a process it followed keeps running and can be connected to again once the server is back';
/** Bound of ending the streams at a stop, and of their ends' passage through the proxy. */
const END_STREAMS_MS = 1_000;

export async function startServer(options: StartOptions = {}): Promise<PaddockServer> {
  const config = resolveServerConfig(options);
  mkdirSync(config.home, { recursive: true, mode: 0o700 });
  // runc sets each sandbox up as the sandbox's own root (an unprivileged host
  // id), which must pass through the home to the runtime's directory: only
  // the sandboxes' group may, without listing it.
  if (!options.runtime && process.getuid?.() === 0) sandboxPassable(config.home, DEFAULT_ID_SHIFT);
  const unlock = lockHome(config.home);
  const log = options.logger ?? createLogger({ level: config.logLevel, destination: config.logFile });
  const metrics = new Metrics();
  const opened = openSqliteStore(join(config.home, 'paddock.db'));
  const store = {
    close: () => opened.close(),
    sandboxes: metrics.timed('sandboxes', opened.sandboxes),
    templates: metrics.timed('templates', opened.templates),
    telemetry: metrics.timed('telemetry', opened.telemetry),
    apiKeys: metrics.timed('apiKeys', opened.apiKeys),
    adminKeys: metrics.timed('adminKeys', opened.adminKeys),
    teams: metrics.timed('teams', opened.teams),
    probe: (timeoutMs: number) => opened.probe(timeoutMs),
  };
  const progress = options.onProgress ?? (() => undefined);
  try {
    const runtime =
      options.runtime ??
      new RuncRuntime({
        dataDir: join(config.home, 'runtime'),
        log: componentLog(log, 'runtime'),
        warmPoolSize: config.warmPoolSize,
        // The plan below says which templates are pooled, once the store is read.
        warmPoolTemplates: [],
        baseImage: config.baseImage,
        insecureRegistries: config.insecureRegistries,
        layersDir: config.imagesDir,
        ...(config.ociRuntime ? { ociRuntime: config.ociRuntime as OciRuntimeName } : {}),
        cacheDir: config.cacheDir,
        network: config.network && {
          name: config.networkName,
          subnet: config.sandboxSubnet,
          uplink: config.uplink,
          allowedPrivate: config.allowedPrivate,
          dns: config.dns,
        },
      });
    await runtime.prepare(progress);
    const keys = store.apiKeys;
    const createdApiKey = (await keys.createFirst('default', options.initialApiKey))?.key;
    const createdAdminKey = (await store.adminKeys.createFirst(options.initialAdminKey))?.key;
    const auth = new Authenticator(keyResolver(keys, store.adminKeys));
    // Without a key, the dashboard's session cookie stands for the credential it was opened with, on the API and the proxy.
    const dashboardApi = config.dashboard ? new DashboardApi(auth, keys, config.dashboardSessionTtlMs, Boolean(config.tlsCert && config.tlsKey)) : undefined;
    if (dashboardApi) auth.add(dashboardApi.resolver());
    const templates = new Templates(store.templates, runtime, store.sandboxes);
    const defaultTeam = await store.teams.byName(DEFAULT_TEAM_NAME);
    // The base template is the default team's (public to all); a store whose base is recorded needs no team for it.
    await templates.ensureBase(async () => {
      if (!defaultTeam) throw new Error(`the team '${DEFAULT_TEAM_NAME}', which the base template is made in, was deleted`);
      return defaultTeam.id;
    });
    const warmPool = isWarmPool(runtime)
      ? new WarmPoolPlan({ runtime, templates: store.templates, names: config.warmPoolTemplates, readyTimeoutMs: config.readyTimeoutMs, log })
      : undefined;
    await warmPool?.refresh();
    if (warmPool) templates.onRemoved(() => void warmPool.refresh());
    const files = new BuildFiles(config.home, config.maxBuildUploadBytes);
    const builder = new Builder({
      runtime,
      records: store.templates,
      files,
      runtimeTemplateOf: async (ref, teamId) => (await templates.startable(ref, { scope: { teamId }, publicToo: true })).runtimeTemplateId,
      concurrency: config.buildConcurrency,
      timeoutMs: config.buildTimeoutMs,
      readyTimeoutMs: config.readyTimeoutMs,
      network: buildNetwork(config),
      log,
      metrics,
      ...(warmPool ? { onReady: () => void warmPool.refresh() } : {}),
    });
    const interrupted = await builder.recover();
    if (interrupted.length) progress(`${interrupted.length} builds were under way when the server stopped; they failed`);
    templates.enableBuilds({ builder, files });
    const sandboxes = new Sandboxes(config, runtime, store, templates, { log, metrics });
    sandboxes.followRuntime();
    const found = await sandboxes.reconcile();
    if (found.adopted || found.lost || found.removed) {
      progress(`adopted ${found.adopted} sandboxes, ${found.lost} had stopped, ${found.removed} strays removed`);
    }
    sandboxes.startSampling();

    const tlsFiles = config.tlsCert && config.tlsKey ? { cert: config.tlsCert, key: config.tlsKey } : undefined;
    const tls = tlsFiles ? readTls(tlsFiles) : undefined;
    if (tls && config.proxyFastPath) log.info('over TLS the proxy relays through the library path; its fast path moves plain bytes only');
    const proxy = createProxy({ runtime, store: store.sandboxes, sandboxes, auth, log, metrics }, { ...config, ...(tls ? { tls } : {}) });
    const proxyAddr = await listen(proxy.server, config.proxyHost, config.proxyPort);
    // The default domain names the port the proxy really got.
    if (options.domain === undefined && !process.env.PADDOCK_DOMAIN) config.domain = `localhost:${proxyAddr.port}`;
    metrics.setSources({
      runtime,
      sandboxCounts: () => store.sandboxes.countByState(),
      sandboxDiskUsed: () => store.telemetry.latestDiskUsed(),
      dirs: { layers: config.imagesDir ?? join(config.home, 'runtime', 'layers'), sandboxes: join(config.home, 'runtime', 'sandboxes') },
    });
    let stopping = false;
    // The domain is known once the proxy listens.
    const dashboard = dashboardApi ? { api: dashboardApi, assets: dashboardAssets(), domain: config.domain } : undefined;
    const api = createApi(
      loadOperations(),
      {
        sandboxes,
        templates,
        keys,
        teams: store.teams,
        usage: (id) => store.sandboxes.usage(id),
        auth,
        log,
        metrics,
        health: new Health(store, runtime, config.home),
        stopping: () => stopping,
        ...(dashboard ? { dashboard } : {}),
      },
      { ...config, ...(tls ? { tls } : {}) },
    );
    await api.listen({ host: config.apiHost, port: config.apiPort });
    const apiAddr = api.server.address() as AddressInfo;
    let closing: Promise<void> | undefined;
    return {
      config: { ...config, apiPort: apiAddr.port, proxyPort: proxyAddr.port },
      apiUrl: urlOf(apiAddr, Boolean(tls)),
      proxyUrl: urlOf(proxyAddr, Boolean(tls)),
      createdApiKey,
      createdAdminKey,
      keys,
      auth,
      runtime,
      log,
      metrics,
      reloadTls() {
        if (!tlsFiles) throw new Error('the server serves plain HTTP: no TLS certificate is configured (PADDOCK_TLS_CERT, PADDOCK_TLS_KEY)');
        const pair = readTls(tlsFiles);
        for (const s of [api.server, proxy.server] as unknown as SecureServer[]) s.setSecureContext(pair);
        log.info({ cert: tlsFiles.cert }, 'TLS certificate reloaded');
      },
      close() {
        closing ??= (async () => {
          // New requests are refused (503, saying why); those under way, streams included, may finish until the deadline.
          stopping = true;
          proxy.refuseNew();
          await builder.close();
          const deadline = Date.now() + config.shutdownGraceMs;
          const proxyClosed = new Promise<void>((r) => proxy.server.close(() => r()));
          let apiDone = false;
          const apiClosed = api.close().then(() => {
            apiDone = true;
          });
          let busy = proxy.closeIdle();
          while ((busy > 0 || !apiDone) && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 50));
            busy = proxy.closeIdle();
          }
          if (busy > 0 || !apiDone) log.warn({ proxyConnections: busy, apiRequests: !apiDone, graceMs: config.shutdownGraceMs }, 'shutting down: what was still under way at the deadline is cut');
          if (busy > 0) {
            // Streams from envd end with a reason their clients are told, rather than with the connection; the end has a moment to pass the proxy.
            const ended = await sandboxes.endStreams(STOPPING_REASON, END_STREAMS_MS).catch(() => 0);
            const passed = Date.now() + END_STREAMS_MS;
            while (ended > 0 && proxy.closeIdle() > 0 && Date.now() < passed) await new Promise((r) => setTimeout(r, 20));
          }
          sandboxes.close();
          // Streams (process output, watches, tunnels) would hold the close open forever.
          proxy.destroyConnections();
          api.server.closeAllConnections();
          await Promise.all([apiClosed, proxyClosed]);
          await runtime.close();
          await store.close();
          unlock();
        })();
        return closing;
      },
    };
  } catch (err) {
    await store.close();
    unlock();
    throw err;
  }
}
