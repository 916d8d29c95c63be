// envd's request handling: the Connect services and the plain HTTP routes
// on one Node HTTP handler.
import { Code, ConnectError, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Filesystem, Process } from '@paddock/models';
import { basicAuthUser, checkFileSignature, secretsEqual, type FileOperation } from './auth.js';
import { HttpError } from './errors.js';
import { readRequestBody } from './request-body.js';
import { getFile, postFile } from './files.js';
import { filesystemService } from './filesystem-service.js';
import { log } from './log.js';
import { MetricsSampler } from './metrics.js';
import { ProcessManager } from './process-manager.js';
import { processCalls, processService } from './process-service.js';
import { serveProcessStream, servesDirectly } from './process-stream.js';
import { EnvdState, type EnvdConfig } from './state.js';

const MAX_INIT_BODY = 1024 * 1024;

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
  const body = await readRequestBody(req, MAX_INIT_BODY, () => new HttpError(413, `request body is larger than ${MAX_INIT_BODY} bytes`));
  const text = body.toString('utf8').trim();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'request body is not valid JSON');
  }
}

function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new HttpError(400, `field '${key}' must be a string`);
  return v;
}

export function createEnvd(config: EnvdConfig = {}): Envd {
  const state = new EnvdState(config);
  const processes = new ProcessManager();
  const sampler = new MetricsSampler();
  const calls = processCalls(state, processes);

  const requireToken: Interceptor = (next) => async (req) => {
    if (state.accessToken !== undefined && !secretsEqual(req.header.get('x-access-token'), state.accessToken)) {
      throw new ConnectError('missing or invalid access token', Code.Unauthenticated);
    }
    return next(req);
  };

  const rpc = connectNodeAdapter({
    routes(router) {
      router.service(Filesystem, filesystemService(state));
      router.service(Process, processService(calls, processes));
    },
    interceptors: [requireToken],
    jsonOptions: { ignoreUnknownFields: true },
    // Clients of E2B's protocol reject compressed stream frames.
    acceptCompression: [],
    grpc: false,
    grpcWeb: false,
    connect: true,
  });

  function tokenOk(req: IncomingMessage): boolean {
    if (state.accessToken === undefined) return true;
    const header = req.headers['x-access-token'];
    return secretsEqual(Array.isArray(header) ? header[0] : header, state.accessToken);
  }

  function authorizeFiles(req: IncomingMessage, params: URLSearchParams, op: FileOperation): void {
    if (tokenOk(req)) return;
    if (state.accessToken !== undefined && params.has('signature')) {
      const check = checkFileSignature(params, op, state.accessToken);
      if (check.ok) return;
      throw new HttpError(401, check.reason);
    }
    throw new HttpError(401, 'missing or invalid access token');
  }

  async function init(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new HttpError(400, 'request body must be a JSON object');
    }
    const b = body as Record<string, unknown>;
    const envVars = b.envVars;
    if (envVars !== undefined && envVars !== null) {
      if (typeof envVars !== 'object' || Array.isArray(envVars)) throw new HttpError(400, "field 'envVars' must be an object of strings");
      for (const [k, v] of Object.entries(envVars)) {
        if (typeof v !== 'string') throw new HttpError(400, `envVars['${k}'] must be a string`);
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
    if (defaultUser && !state.users.lookup(defaultUser)) throw new HttpError(400, `defaultUser '${defaultUser}' does not exist`);
    for (const [k, v] of Object.entries((envVars as Record<string, string> | undefined) ?? {})) state.envVars.set(k, v);
    if (accessToken) state.accessToken = accessToken;
    if (defaultUser) state.defaultUser = defaultUser;
    if (defaultWorkdir) state.defaultWorkdir = defaultWorkdir;
    res.writeHead(204).end();
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://envd');
    const method = req.method ?? 'GET';
    const allow = (...methods: string[]) => {
      if (!methods.includes(method)) {
        res.setHeader('Allow', methods.join(', '));
        throw new HttpError(405, `${method} is not allowed on ${url.pathname}; use ${methods.join(' or ')}`);
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
        authorizeFiles(req, url.searchParams, op);
        const user = state.httpUser(url.searchParams.get('username') || basicAuthUser(req.headers.authorization));
        await (op === 'read' ? getFile(req, res, url.searchParams, user) : postFile(req, res, url.searchParams, user));
        return;
      }
      case '/metrics':
      case '/envs':
      case '/init':
        break;
      default:
        throw new HttpError(404, `no route for ${method} ${url.pathname}`);
    }
    if (!tokenOk(req)) throw new HttpError(401, 'missing or invalid access token');
    if (url.pathname === '/metrics') {
      allow('GET');
      sendJson(res, 200, sampler.sample());
    } else if (url.pathname === '/envs') {
      allow('GET');
      sendJson(res, 200, Object.fromEntries(state.envVars));
    } else {
      allow('POST');
      await init(req, res);
    }
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0]!;
    const format = path === '/process.Process/Start' || path === '/process.Process/Connect' ? servesDirectly(req) : undefined;
    if (format) {
      const method = path === '/process.Process/Start' ? 'start' : 'connect';
      serveProcessStream(req, res, method, calls, tokenOk(req), format).catch((err: unknown) => {
        log.error('request failed', { method: req.method, url: req.url, error: String(err) });
        res.destroy();
      });
      return;
    }
    if (path.startsWith('/filesystem.Filesystem/') || path.startsWith('/process.Process/')) {
      rpc(req, res);
      return;
    }
    route(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) {
        sendError(res, err.status, err.message);
        return;
      }
      log.error('request failed', { method: req.method, url: req.url, error: String(err) });
      sendError(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
    });
  }

  return { handle, state, processes, shutdown: () => processes.shutdown() };
}
