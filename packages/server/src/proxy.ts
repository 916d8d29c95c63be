// The sandbox proxy: the only way into a sandbox. A request names its
// sandbox and port by host (`{port}-{sandboxID}.{domain}`) or by the
// `E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers; signed `/files` URLs that
// carry neither are matched by their signature. Port 49983 reaches envd's
// socket, any other port the sandbox's own TCP port through the runtime's
// tunnel. Bodies stream both ways without buffering; WebSocket upgrades
// are spliced through. A sandbox that is not running answers 502.
import { fileSignature, type FileOperation } from '@paddock/envd';
import { ENVD_PORT, type Runtime } from '@paddock/runtime';
import { Agent, createServer, request, type IncomingHttpHeaders, type IncomingMessage, type RequestOptions, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import type { Sandboxes } from './sandboxes.js';
import type { SandboxRecord, SandboxStore } from './store/sandboxes.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'upgrade']);
const HOST_ROUTE = /^(\d{1,5})-([a-z0-9]{1,63})\./;
const TRAFFIC_TOKEN_HEADER = 'e2b-traffic-access-token';

class ProxyError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface Target {
  sandbox: SandboxRecord;
  port: number;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function forwardHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = v;
  return out;
}

function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ code: status, message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Returns a function that holds back what is written to `out` until the end of
 * the current turn of the event loop. Called on every chunk that arrives, it
 * makes what one read brought in leave in one write: a response's headers with
 * its first frames, the last frames with the end of the chunked body. Written
 * as they come, each piece is a packet of its own and a wakeup on the far side.
 */
function holderFor(out: { cork(): void; uncork(): void; readonly writableEnded: boolean }): () => void {
  let holding = false;
  return () => {
    if (holding) return;
    holding = true;
    out.cork();
    setImmediate(() => {
      holding = false;
      // end() has let everything out already, and the connection may be serving the next request.
      if (!out.writableEnded) out.uncork();
    });
  };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface ProxyDeps {
  runtime: Runtime;
  store: SandboxStore;
  sandboxes: Sandboxes;
}

export function createProxy({ runtime, store, sandboxes }: ProxyDeps): Server {
  // Keep-alive connections to each sandbox's envd socket.
  const agents = new Map<string, Agent>();
  const agentFor = (socketPath: string) => {
    let a = agents.get(socketPath);
    if (!a) agents.set(socketPath, (a = new Agent({ keepAlive: true, maxSockets: 256 })));
    return a;
  };

  /** Finds a running sandbox whose envd token signed this /files URL. */
  function bySignature(method: string, url: URL): SandboxRecord | undefined {
    const signature = url.searchParams.get('signature');
    if (!signature || url.pathname !== '/files') return undefined;
    const op: FileOperation = method === 'GET' || method === 'HEAD' ? 'read' : 'write';
    const rawExp = url.searchParams.get('signature_expiration');
    const exp = rawExp === null || rawExp === '' ? undefined : Number(rawExp);
    const path = url.searchParams.get('path') ?? '';
    const user = url.searchParams.get('username') ?? '';
    return store
      .allLive()
      .find((s) => s.envdAccessToken !== null && sameSecret(fileSignature(path, op, user, s.envdAccessToken, exp), signature));
  }

  async function target(req: IncomingMessage): Promise<Target> {
    const url = new URL(req.url ?? '/', 'http://proxy');
    let id: string | undefined;
    let port: number | undefined;
    const host = header(req.headers, 'host') ?? '';
    const m = HOST_ROUTE.exec(host);
    if (m) {
      port = Number(m[1]);
      id = m[2];
    } else if (header(req.headers, 'e2b-sandbox-id')) {
      id = header(req.headers, 'e2b-sandbox-id');
      port = Number(header(req.headers, 'e2b-sandbox-port') ?? ENVD_PORT);
    } else {
      const signed = bySignature(req.method ?? 'GET', url);
      if (signed) return resolveState(signed, ENVD_PORT);
      if (url.pathname === '/files' && url.searchParams.has('signature')) throw new ProxyError(401, 'invalid signature');
      throw new ProxyError(400, "the request names no sandbox: use the host '{port}-{sandboxID}.{domain}' or the E2b-Sandbox-Id and E2b-Sandbox-Port headers");
    }
    if (!Number.isInteger(port) || port! < 1 || port! > 65535) throw new ProxyError(400, `sandbox port '${port}' is not a TCP port`);
    const s = id && /^[a-z0-9]{1,63}$/.test(id) ? store.live(id) : undefined;
    if (!s) throw new ProxyError(502, `sandbox '${id}' is not running`);
    return resolveState(s, port!);
  }

  async function resolveState(s: SandboxRecord, port: number): Promise<Target> {
    if (s.state === 'paused') {
      if (!s.autoResume) throw new ProxyError(502, `sandbox '${s.id}' is paused`);
      await sandboxes.connect(s.id, undefined).catch((err: Error) => {
        throw new ProxyError(502, `sandbox '${s.id}' is paused and could not be resumed: ${err.message}`);
      });
      return { sandbox: store.live(s.id)!, port };
    }
    return { sandbox: s, port };
  }

  function checkTraffic(t: Target, headers: IncomingHttpHeaders): void {
    if (t.port === ENVD_PORT || t.sandbox.trafficAccessToken === null) return;
    const given = header(headers, TRAFFIC_TOKEN_HEADER);
    if (!given || !sameSecret(given, t.sandbox.trafficAccessToken)) {
      throw new ProxyError(403, `sandbox '${t.sandbox.id}' takes traffic only with its ${TRAFFIC_TOKEN_HEADER} header`);
    }
  }

  /** A byte stream to the target port: envd's socket or a tunnel. */
  function upstream(t: Target): Promise<Duplex> {
    if (t.port !== ENVD_PORT) return runtime.openTunnel(t.sandbox.id, t.port);
    const endpoint = runtime.envdEndpoint(t.sandbox.id);
    return new Promise((resolve, reject) => {
      const sock = 'socketPath' in endpoint ? connect(endpoint.socketPath) : connect(endpoint.port, endpoint.host);
      sock.once('connect', () => resolve(sock));
      sock.once('error', reject);
    });
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t = await target(req);
    checkTraffic(t, req.headers);
    const headers = forwardHeaders(req.headers);
    const endpoint = runtime.envdEndpoint(t.sandbox.id);
    const options: RequestOptions =
      t.port === ENVD_PORT && 'socketPath' in endpoint
        ? { socketPath: endpoint.socketPath, agent: agentFor(endpoint.socketPath) }
        : {
            // A fresh tunnel per request: it is one TCP connection inside the sandbox.
            createConnection: ((_opts: unknown, done: (err: Error | null, socket?: Duplex) => void) => {
              upstream(t).then(
                (s) => done(null, s),
                (err: Error) => done(err),
              );
              return undefined;
            }) as unknown as RequestOptions['createConnection'],
          };
    const up = request({ ...options, method: req.method, path: req.url, headers }, (upRes) => {
      const out: IncomingHttpHeaders = {};
      for (const [k, v] of Object.entries(upRes.headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
      const hold = holderFor(res);
      hold();
      res.writeHead(upRes.statusCode ?? 502, out as Record<string, string | string[]>);
      // Streams (process output, watches) must reach the client as they come, so the
      // headers leave at the end of this turn even when no body comes with them.
      res.flushHeaders();
      upRes.on('data', hold);
      upRes.pipe(res);
      upRes.once('error', () => res.destroy());
    });
    up.on('socket', (s) => (s as { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true));
    up.once('error', (err) => sendError(res, 502, `sandbox '${t.sandbox.id}' did not answer on port ${t.port}: ${err.message}`));
    res.once('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.on('data', holderFor(up));
    req.pipe(up);
  }

  async function onUpgrade(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    const t = await target(req);
    checkTraffic(t, req.headers);
    const up = await upstream(t);
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    up.write(lines.join('\r\n') + '\r\n\r\n');
    if (head.length) up.write(head);
    up.pipe(client);
    client.pipe(up);
    up.once('error', () => client.destroy());
    client.once('error', () => up.destroy());
    up.once('close', () => client.destroy());
    client.once('close', () => up.destroy());
  }

  const server = createServer({ noDelay: true, requestTimeout: 0, keepAliveTimeout: 65_000 }, (req, res) => {
    onRequest(req, res).catch((err: unknown) => {
      req.resume();
      if (err instanceof ProxyError) sendError(res, err.status, err.message);
      else sendError(res, 502, `proxy error: ${(err as Error).message}`);
    });
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    onUpgrade(req, socket, head).catch((err: unknown) => {
      const status = err instanceof ProxyError ? err.status : 502;
      const body = JSON.stringify({ code: status, message: (err as Error).message });
      socket.end(`HTTP/1.1 ${status} Error\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    });
  });
  server.on('close', () => {
    for (const a of agents.values()) a.destroy();
  });
  return server;
}
