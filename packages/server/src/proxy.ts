// The sandbox proxy: the only way into a sandbox. A request names its
// sandbox and port by host (`{port}-{sandboxID}.{domain}`) or by the
// `E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers; signed `/files` URLs that
// carry neither are matched by their signature. Port 49983 reaches envd's
// socket, any other port the sandbox's own TCP port through the runtime's
// tunnel. Connections of both are kept and reused, a tunnel's per port for a
// short while (PORT_IDLE_MS), and let go when the sandbox is paused or
// killed: none carries a request into a sandbox that is not running. The relay in
// ./relay carries requests and answers (through Node's http server and
// undici, or its fast path); WebSocket upgrades are spliced through. A
// sandbox that is not running answers 502. A request the proxy refuses itself (400,
// 401, 403, 502) closes its connection: a client refused holds none.
//
// What opens a sandbox is its own secrets: envd checks its access token, the
// proxy its traffic token; the SDKs send no API key here. A request that
// does carry a Paddock credential (an API key; a dashboard's session) is
// held to its team besides: another team's sandbox is not there for it,
// with the body of a sandbox that does not exist. A header that is no valid
// credential is left alone, for the sandbox's own service may use the name.
import {
  ENVD_PORT,
  FILE_SIGNATURE_EXPIRATION_PARAM,
  FILE_SIGNATURE_PARAM,
  SANDBOX_ID_HEADER,
  SANDBOX_PORT_HEADER,
  TRAFFIC_ACCESS_TOKEN_HEADER,
  encodeFileSignature,
  fileOperationOf,
  fileSignaturePayload,
  isSandboxId,
  isTcpPort,
  parseSandboxHost,
} from '@paddock/protocol';
import type { Runtime } from '@paddock/runtime';
import { createHash, timingSafeEqual } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import type { SecureContextOptions } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { ConnectionLimits } from './config.js';
import { createRelay, type SandboxRelay } from './relay/index.js';
import { ProxyError, type Destination, type RequestView } from './relay/relay.js';
import type { Sandboxes } from './sandboxes.js';
import { inScope, type SandboxRecord, type SandboxRoute, type SandboxRepository } from './store/repositories.js';
import { SERVER, scopeOf, type Authenticator } from './auth.js';
import { CorsPolicy } from './cors.js';
import { pathOf, requestId, type Logger } from './log.js';
import { REQUEST_ID } from './relay/headers.js';
import type { Metrics } from './metrics.js';


/**
 * How long a kept tunnel to a sandbox's port may wait for its next request.
 * Shorter than the idle timeouts of common servers (Node's 5 s, uvicorn's
 * 5 s, gunicorn's 2 s), so that the proxy lets go of a connection before
 * the service does and never sends a request on one being closed; long
 * enough for calls one after another (the code interpreter's) to share one.
 */
export const PORT_IDLE_MS = 1_000;
/** Tunnels kept to one port of a sandbox, at most. */
const PORT_MAX_KEPT = 8;

interface Target {
  sandbox: SandboxRoute;
  port: number;
}

/** A field's value; Node joins a repeated one with commas, which no id, port or token holds. */
function field(req: RequestView, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(', ') : v;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface ProxyDeps {
  runtime: Runtime;
  store: SandboxRepository;
  sandboxes: Sandboxes;
  auth: Authenticator;
  log: Logger;
  metrics: Metrics;
}

/** The proxy: its relay, and the switch that refuses new requests while the server stops. */
export interface SandboxProxy extends SandboxRelay {
  refuseNew(): void;
}

export function createProxy(
  { runtime, store, sandboxes, auth, log, metrics }: ProxyDeps,
  limits: ConnectionLimits & { proxyFastPath: boolean; corsOrigins: string[]; tls?: SecureContextOptions },
): SandboxProxy {
  let stopping = false;
  const cors = new CorsPolicy(limits.corsOrigins);
  /** Finds a running sandbox whose envd token signed this /files URL. */
  async function bySignature(method: string, url: URL): Promise<SandboxRecord | undefined> {
    const signature = url.searchParams.get(FILE_SIGNATURE_PARAM);
    if (!signature || url.pathname !== '/files') return undefined;
    const operation = fileOperationOf(method);
    const rawExp = url.searchParams.get(FILE_SIGNATURE_EXPIRATION_PARAM);
    const expiration = rawExp === null || rawExp === '' ? undefined : Number(rawExp);
    const path = url.searchParams.get('path') ?? '';
    const user = url.searchParams.get('username') ?? '';
    const signed = (accessToken: string) =>
      encodeFileSignature(createHash('sha256').update(fileSignaturePayload({ path, operation, user, accessToken, expiration })).digest());
    return (await store.allLive()).find((s) => s.envdAccessToken !== null && sameSecret(signed(s.envdAccessToken), signature));
  }

  async function target(req: RequestView): Promise<Target> {
    let id: string | undefined;
    let port: number | undefined;
    const byHost = parseSandboxHost(req.headers.host ?? '');
    if (byHost) {
      port = byHost.port;
      id = byHost.sandboxId;
    } else if (field(req, SANDBOX_ID_HEADER)) {
      id = field(req, SANDBOX_ID_HEADER);
      port = Number(field(req, SANDBOX_PORT_HEADER) ?? ENVD_PORT);
    } else {
      const target = req.url ?? '';
      let url: URL;
      try {
        url = new URL(target, 'http://proxy');
      } catch {
        throw new ProxyError(400, `request target '${target.slice(0, 64)}' is not a valid URL`);
      }
      const signed = await bySignature(req.method ?? '', url);
      if (signed) return resolveState(await ofCallersTeam(req, signed), ENVD_PORT);
      if (url.pathname === '/files' && url.searchParams.has(FILE_SIGNATURE_PARAM)) throw new ProxyError(401, 'invalid signature');
      throw new ProxyError(400, "the request names no sandbox: use the host '{port}-{sandboxID}.{domain}' or the E2b-Sandbox-Id and E2b-Sandbox-Port headers");
    }
    if (!isTcpPort(port!)) throw new ProxyError(400, `sandbox port '${port}' is not a TCP port`);
    const s = isSandboxId(id) ? await store.route(id) : undefined;
    // E2B's body for a sandbox that is not there: clients read both fields.
    if (!s) throw new ProxyError(502, 'The sandbox was not found', { sandboxId: String(id) });
    return resolveState(await ofCallersTeam(req, s), port!);
  }

  /** The sandbox, unless the request carries a credential of a team it is not of: then, as if there were none. */
  async function ofCallersTeam<S extends Pick<SandboxRoute, 'id' | 'teamId'>>(req: RequestView, s: S): Promise<S> {
    const who = await auth.identify(req.headers, { bearer: false, ...(req.method ? { method: req.method } : {}) });
    if (who.kind === 'caller' && !inScope(scopeOf(who.caller), s.teamId)) throw new ProxyError(502, 'The sandbox was not found', { sandboxId: s.id });
    return s;
  }

  async function resolveState(s: SandboxRoute, port: number): Promise<Target> {
    if (s.state === 'paused') {
      if (!s.autoResume) throw new ProxyError(502, `sandbox '${s.id}' is paused`);
      await sandboxes.connect(SERVER, s.id, undefined).catch((err: Error) => {
        throw new ProxyError(502, `sandbox '${s.id}' is paused and could not be resumed: ${err.message}`);
      });
      const resumed = await store.route(s.id);
      if (!resumed) throw new ProxyError(502, 'The sandbox was not found', { sandboxId: s.id });
      return { sandbox: resumed, port };
    }
    return { sandbox: s, port };
  }

  function checkTraffic(t: Target, req: RequestView): void {
    if (t.port === ENVD_PORT || t.sandbox.trafficAccessToken === null) return;
    const given = field(req, TRAFFIC_ACCESS_TOKEN_HEADER);
    if (!given || !sameSecret(given, t.sandbox.trafficAccessToken)) {
      throw new ProxyError(403, `sandbox '${t.sandbox.id}' takes traffic only with its ${TRAFFIC_ACCESS_TOKEN_HEADER} header`);
    }
  }

  function connectTo(endpoint: { socketPath: string } | { host: string; port: number }): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      const sock = 'socketPath' in endpoint ? connect(endpoint.socketPath) : connect(endpoint.port, endpoint.host);
      sock.once('connect', () => {
        sock.off('error', reject);
        resolve(sock);
      });
      sock.once('error', reject);
    });
  }

  async function toSandbox(req: RequestView): Promise<Destination> {
    const t = await target(req);
    checkTraffic(t, req);
    const name = `sandbox '${t.sandbox.id}' on port ${t.port}`;
    const sandbox = t.sandbox.id;
    if (t.port !== ENVD_PORT) {
      const mask = t.sandbox.maskRequestHost;
      return {
        name,
        target: 'port',
        poolKey: `${sandbox}:${t.port}`,
        sandbox,
        idleMs: PORT_IDLE_MS,
        maxKept: PORT_MAX_KEPT,
        open: () => runtime.openTunnel(sandbox, t.port),
        ...(mask ? { host: mask.replaceAll('${PORT}', String(t.port)) } : {}),
      };
    }
    const endpoint = runtime.envdEndpoint(sandbox);
    const poolKey = 'socketPath' in endpoint ? endpoint.socketPath : `${endpoint.host}:${endpoint.port}`;
    const corsFields = cors.answer(req.headers);
    return { name, target: 'envd', poolKey, sandbox, open: () => connectTo(endpoint), ...(corsFields ? { responseHeaders: corsFields } : {}) };
  }

  async function route(req: RequestView): Promise<Destination> {
    // A preflight for envd (by its port in the host, or by the E2b-Sandbox-*
    // headers it only names) is answered here; one for a sandbox's own port
    // goes to the service there.
    if (CorsPolicy.isPreflight(req.method, req.headers)) {
      const byHost = parseSandboxHost(req.headers.host ?? '');
      if (!byHost || byHost.port === ENVD_PORT) {
        const fields = cors.preflight(req.headers);
        if (!fields) throw new ProxyError(403, `origin '${String(req.headers.origin)}' may not call this server (PADDOCK_CORS_ORIGINS)`);
        throw new ProxyError(204, '', {}, fields);
      }
    }
    try {
      return await toSandbox(req);
    } catch (err) {
      // The proxy's own answer to a page is readable by it.
      const corsFields = err instanceof ProxyError ? cors.answer(req.headers) : undefined;
      if (!corsFields) throw err;
      const e = err as ProxyError;
      throw new ProxyError(e.status, e.message, e.fields, { ...e.headers, ...corsFields });
    }
  }

  /**
   * Routes a request, counting and logging it: what was routed where, what
   * the proxy refused itself, and every upstream that could not be reached
   * (for envd: an envd that does not answer). Both relays route here, so
   * both are counted alike.
   */
  async function observed(req: RequestView): Promise<Destination> {
    // The client's id (a plain token) or a new one: sent on to the sandbox, answered, and on the proxy's lines.
    const reqId = requestId(req.headers[REQUEST_ID]);
    const at = { reqId, method: req.method, path: pathOf(req.url) };
    let dest: Destination;
    try {
      if (stopping) throw new ProxyError(503, 'the server is shutting down; retry once it is back');
      dest = await route(req);
    } catch (err) {
      const status = err instanceof ProxyError ? err.status : 502;
      if (status >= 400) {
        metrics.proxyErrors.inc({ status: String(status), target: 'none' });
        log.info({ ...at, status, reason: (err as Error).message }, 'proxy refused a request');
      }
      if (err instanceof ProxyError) throw new ProxyError(err.status, err.message, err.fields, { ...err.headers, [REQUEST_ID]: reqId });
      throw err;
    }
    const target = dest.target ?? 'port';
    metrics.proxyRequests.inc({ target });
    log.debug({ ...at, to: dest.name }, 'proxy request');
    const open = dest.open;
    return {
      ...dest,
      requestId: reqId,
      responseHeaders: { ...dest.responseHeaders, [REQUEST_ID]: reqId },
      open: () =>
        open().catch((err: Error) => {
          metrics.proxyErrors.inc({ status: '502', target });
          log.warn({ ...at, to: dest.name, reason: err.message }, 'proxy could not reach the sandbox');
          throw err;
        }),
    };
  }

  const relay = createRelay({
    fastPath: limits.proxyFastPath,
    route: observed,
    headTimeoutMs: limits.headerTimeoutMs,
    bodyTimeoutMs: limits.bodyTimeoutMs,
    idleTimeoutMs: limits.idleTimeoutMs,
    maxConnectionsPerAddress: limits.maxConnectionsPerAddress,
    ...(limits.tls ? { tls: limits.tls } : {}),
  });
  // A paused or killed sandbox's kept connections go at once: none may carry a request to it once it runs again, or to what took its place.
  sandboxes.onLeave((id) => relay.dropSandbox(id));
  // Bytes each way on client connections, headers included, counted as each connection closes.
  relay.server.on('connection', (socket: Socket) =>
    socket.once('close', () => {
      metrics.proxyBytes.inc({ direction: 'in' }, socket.bytesRead);
      metrics.proxyBytes.inc({ direction: 'out' }, socket.bytesWritten);
    }),
  );
  return Object.assign(relay, {
    refuseNew() {
      stopping = true;
    },
  });
}
