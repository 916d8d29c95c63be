// envd's request handling: the Connect services through connect-node's
// handler, and the plain HTTP routes behind it, on one Node HTTP handler.
import { Code, ConnectError, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Filesystem, Process } from '@paddock/models';
import { basicAuthUser, checkAccess, type FileOperation } from './auth.js';
import { EnvdRouteError } from './errors.js';
import { readRequestBody } from './request-body.js';
import { getFile, postFile } from './files.js';
import { filesystemService } from './filesystem-service.js';
import { isLegacyClient, legacyAnswers } from './legacy.js';
import { log } from './log.js';
import { MetricsSampler } from './metrics.js';
import { ProcessManager } from './process-manager.js';
import { processService } from './process-service.js';
import { EnvdState, type EnvdConfig } from './state.js';

const MAX_INIT_BODY = 1024 * 1024;

/** Start and Connect requests are a few fields; anything near this is not one. */
const MAX_PROCESS_STREAM_REQUEST = 4 * 1024 * 1024;

export interface Envd {
  handle(req: IncomingMessage, res: ServerResponse): void;
  readonly state: EnvdState;
  readonly processes: ProcessManager;
  /** Ends every process envd started. */
  shutdown(): Promise<void>;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, { code: status, message });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const body = await readRequestBody(req, MAX_INIT_BODY, () => new EnvdRouteError(413, `request body is larger than ${MAX_INIT_BODY} bytes`));
  const text = body.toString('utf8').trim();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new EnvdRouteError(400, 'request body is not valid JSON');
  }
}

function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new EnvdRouteError(400, `field '${key}' must be a string`);
  return v;
}

export function createEnvd(config: EnvdConfig = {}): Envd {
  const state = new EnvdState(config);
  const processes = new ProcessManager();
  const sampler = new MetricsSampler();

  const requireToken: Interceptor = (next) => async (req) => {
    const check = checkAccess(state.accessToken, req.header.get('x-access-token'));
    if (!check.ok) throw new ConnectError(check.reason, Code.Unauthenticated);
    return next(req);
  };

  // connect answers a binary request message that does not decode with
  // `internal`, the code it gives a response that does not; a request's is
  // the client's error, as JSON that does not parse already is. It is seen
  // here for the streaming calls, whose messages are decoded as the call
  // reads them; a unary call's is decoded before any interceptor runs.
  const undecodableIsInvalid: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.Internal && err.rawMessage.startsWith('parse binary:')) {
        throw new ConnectError(`the request is not a valid ${req.method.input.typeName}: ${err.rawMessage}`, Code.InvalidArgument);
      }
      throw err;
    }
  };

  /** Lets a request to an HTTP route in, or throws the 401 that says why not. */
  function authorizeRoute(req: IncomingMessage, signedFile?: { params: URLSearchParams; op: FileOperation }): void {
    const header = req.headers['x-access-token'];
    const check = checkAccess(state.accessToken, Array.isArray(header) ? header[0] : header, signedFile);
    if (!check.ok) throw new EnvdRouteError(401, check.reason);
  }

  async function init(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new EnvdRouteError(400, 'request body must be a JSON object');
    }
    const b = body as Record<string, unknown>;
    const envVars = b.envVars;
    if (envVars !== undefined && envVars !== null) {
      if (typeof envVars !== 'object' || Array.isArray(envVars)) throw new EnvdRouteError(400, "field 'envVars' must be an object of strings");
      for (const [k, v] of Object.entries(envVars)) {
        if (typeof v !== 'string') throw new EnvdRouteError(400, `envVars['${k}'] must be a string`);
      }
    }
    const accessToken = optionalString(b, 'accessToken');
    const defaultUser = optionalString(b, 'defaultUser');
    const defaultWorkdir = optionalString(b, 'defaultWorkdir');
    // `timestamp` is type-checked and otherwise ignored on purpose. E2B's
    // envd sets the clock from it because its VM keeps a clock of its own;
    // a Paddock sandbox is a container that shares the host's clock, so
    // setting it would change the time for the host and every sandbox on it.
    optionalString(b, 'timestamp');
    if (defaultUser && !state.users.lookup(defaultUser)) throw new EnvdRouteError(400, `defaultUser '${defaultUser}' does not exist`);
    for (const [k, v] of Object.entries((envVars as Record<string, string> | undefined) ?? {})) state.envVars.set(k, v);
    if (accessToken) state.accessToken = accessToken;
    if (defaultUser) state.defaultUser = defaultUser;
    if (defaultWorkdir) state.defaultWorkdir = defaultWorkdir;
    res.writeHead(204).end();
  }

  async function endStreams(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new EnvdRouteError(400, 'request body must be a JSON object');
    const reason = (body as Record<string, unknown>).reason;
    if (typeof reason !== 'string' || reason.length === 0 || reason.length > 500) throw new EnvdRouteError(400, "field 'reason' must be a string of 1 to 500 characters");
    sendJson(res, 200, { ended: state.streams.end(reason) });
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://envd');
    const method = req.method ?? 'GET';
    const allow = (...methods: string[]) => {
      if (!methods.includes(method)) {
        res.setHeader('Allow', methods.join(', '));
        throw new EnvdRouteError(405, `${method} is not allowed on ${url.pathname}; use ${methods.join(' or ')}`);
      }
    };
    switch (url.pathname) {
      case '/health':
        allow('GET', 'HEAD');
        res.writeHead(204).end();
        return;
      case '/files': {
        allow('GET', 'POST');
        const op: FileOperation = method === 'GET' ? 'read' : 'write';
        authorizeRoute(req, { params: url.searchParams, op });
        const user = state.httpUser(url.searchParams.get('username') || basicAuthUser(req.headers.authorization));
        await (op === 'read' ? getFile(req, res, url.searchParams, user) : postFile(req, res, url.searchParams, user));
        return;
      }
      case '/metrics':
      case '/envs':
      case '/init':
      case '/streams/end':
        break;
      default:
        throw new EnvdRouteError(404, `no route for ${method} ${url.pathname}`);
    }
    authorizeRoute(req);
    if (url.pathname === '/metrics') {
      allow('GET');
      sendJson(res, 200, sampler.sample());
    } else if (url.pathname === '/envs') {
      allow('GET');
      sendJson(res, 200, Object.fromEntries(state.envVars));
    } else if (url.pathname === '/streams/end') {
      allow('POST');
      await endStreams(req, res);
    } else {
      allow('POST');
      await init(req, res);
    }
  }

  function serveRoute(req: IncomingMessage, res: ServerResponse): void {
    route(req, res).catch((err: unknown) => {
      if (err instanceof EnvdRouteError) {
        sendError(res, err.status, err.message);
        return;
      }
      log.error('request failed', { method: req.method, url: req.url, error: String(err) });
      sendError(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
    });
  }

  // What each handler is given; the router merges a handler's own options
  // over these, except the choice of protocols, which each must repeat.
  const protocols = { grpc: false, grpcWeb: false, connect: true } as const;
  const processImpl = processService(state, processes);
  const adapter = (legacy: boolean) =>
    connectNodeAdapter({
      routes(router) {
        router.service(Filesystem, filesystemService(state));
        router.service(Process, processImpl);
        // Registered again with a limit of their own, in place of the service's handlers.
        const limited = { ...protocols, readMaxBytes: MAX_PROCESS_STREAM_REQUEST };
        router.rpc(Process.method.start, processImpl.start, limited);
        router.rpc(Process.method.connect, processImpl.connect, limited);
      },
      ...protocols,
      interceptors: legacy ? [requireToken, undecodableIsInvalid, legacyAnswers] : [requireToken, undecodableIsInvalid],
      jsonOptions: legacy ? { ignoreUnknownFields: true, enumAsInteger: true } : { ignoreUnknownFields: true },
      // Clients of E2B's protocol reject compressed stream frames.
      acceptCompression: [],
      // Any path that is not an RPC. An h2c request has all that the routes
      // read of one (main.ts hands both kinds to this handler).
      fallback: (req, res) => serveRoute(req as IncomingMessage, res as ServerResponse),
    });
  const current = adapter(false);
  // Old Python SDKs get the messages they parse (legacy.ts).
  const legacyClients = adapter(true);
  const handle: typeof current = (req, res) => (isLegacyClient(req as IncomingMessage) ? legacyClients : current)(req, res);

  return { handle, state, processes, shutdown: () => processes.shutdown() };
}
