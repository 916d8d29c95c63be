// The control API: one route per operation of openapi/control.yaml, its
// request schemas taken from the document, and one handler per operationId.
// The handler table is typed by the generated `control.operations`, so an
// operation without a handler, or an answer that does not match the spec,
// does not compile.
import { Ajv, type Options } from 'ajv';
import ajvFormatsModule from 'ajv-formats';
import fastifyCookie from '@fastify/cookie';
import fastifyCors from '@fastify/cors';
import Fastify, { LogController, type FastifyHttpOptions, type ConnectionError, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { STATUS_CODES, type Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import type { SecureContextOptions } from 'node:tls';
import type { Readable } from 'node:stream';
import type { control } from '@paddock/models';
import type { ConnectionLimits } from './config.js';
import { registerDashboardAssets } from './dashboard/assets.js';
import type { DashboardApi, SessionRef } from './dashboard/session-api.js';
import { pathOf, requestId, withLog, type Logger } from './log.js';
import { limitConnectionsPerAddress } from './connection-limit.js';
import { ApiError, errorBody, toApiError } from './errors.js';
import type { Operation } from './openapi.js';
import { nextTokenHeader } from './pagination.js';
import type { Health } from './health.js';
import type { Metrics } from './metrics.js';
import type { Sandboxes } from './sandboxes.js';
import { scopeOf, type Authenticator, type Caller } from './auth.js';
import type { ApiKeyRecord, ApiKeyRepository, SandboxRepository, TeamLimits, TeamRecord, TeamRepository } from './store/repositories.js';
import { BUILDS_NOT_IMPLEMENTED, type Templates } from './templates.js';

// ajv-formats is CommonJS; under ESM its plugin is the default export's default.
const ajvFormats = ((ajvFormatsModule as unknown as { default?: typeof ajvFormatsModule }).default ?? ajvFormatsModule) as unknown as (ajv: Ajv) => Ajv;

type Ops = control.operations;
type OpId = keyof Ops;
type Params<K extends OpId> = Ops[K]['parameters'] extends { path?: infer P } ? (P extends undefined ? never : Exclude<P, undefined>) : never;
type Query<K extends OpId> = Ops[K]['parameters'] extends { query?: infer Q } ? Exclude<Q, undefined> : never;
type Body<K extends OpId> = Ops[K] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : undefined;
// 503 is an answer a handler gives, not an error, where its body is a document of its own (readiness).
type SuccessCodes = 200 | 201 | 202 | 204 | 503;
type Success<K extends OpId> = {
  [S in SuccessCodes & keyof Ops[K]['responses']]: Ops[K]['responses'][S] extends { content: { 'application/json': infer B } }
    ? { status: S; body: B; headers?: Record<string, string> }
    : Ops[K]['responses'][S] extends { content: { 'text/plain': infer B } }
      ? { status: S; body: B; headers: { 'content-type': string } }
      : { status: S; headers?: Record<string, string> };
}[SuccessCodes & keyof Ops[K]['responses']];

interface Call<K extends OpId> {
  params: Params<K>;
  query: Query<K>;
  body: Body<K>;
  /** `scheme://host` the client reached the API at: the base of URLs the API hands out. */
  origin: string;
  /** Who made the request (on public routes, nobody: their handlers do not ask). */
  caller: Caller;
  /** The dashboard session the request was made with, when it came with the session cookie instead of a key. */
  session?: SessionRef;
}

type Handlers = { [K in OpId]: (call: Call<K>) => Promise<Success<K>> | Success<K> };

export interface ApiDeps {
  sandboxes: Sandboxes;
  templates: Templates;
  keys: ApiKeyRepository;
  teams: TeamRepository;
  /** What each team's running sandboxes hold, for the admin routes. */
  usage: SandboxRepository['usage'];
  auth: Authenticator;
  log: Logger;
  metrics: Metrics;
  health: Health;
  /** True once the server is stopping: new requests are refused with 503, those under way finish. */
  stopping(): boolean;
  /** The web dashboard's sessions and files; undefined when it is off. */
  dashboard?: { api: DashboardApi; assets: string | undefined; domain: string };
}

const dashboardOff = (): never => {
  throw new ApiError(404, 'the dashboard is off on this server (PADDOCK_DASHBOARD)');
};

const notImplemented = (): never => {
  throw new ApiError(501, BUILDS_NOT_IMPLEMENTED);
};

const iso = (ms: number) => new Date(ms).toISOString();

/** A key as the `TeamAPIKey` schema lists it. */
const listedKey = (k: ApiKeyRecord) => ({
  id: k.id,
  name: k.name,
  mask: k.maskParts,
  createdAt: iso(k.createdAt),
  createdBy: null,
  lastUsed: k.lastUsedAt === null ? null : iso(k.lastUsedAt),
});

/** Who made a request; its key's id (never the key) goes on its log line. */
const callerOfRequest = new WeakMap<FastifyRequest, Caller>();

/** The team a caller makes things in: the admin credential has none. */
function teamOfCaller(caller: Caller, what: string): string {
  if (caller.teamId === null) throw new ApiError(403, `the admin credential belongs to no team and ${what}; use an API key of a team, or the /admin routes`);
  return caller.teamId;
}

/** A limit as the API takes it: a number, null (none), or left out (unchanged). */
const limitsOf = (l: control.components['schemas']['TeamLimits'] | undefined): Partial<TeamLimits> => ({
  ...(l?.maxSandboxes !== undefined ? { maxSandboxes: l.maxSandboxes } : {}),
  ...(l?.maxMemoryMB !== undefined ? { maxMemoryMB: l.maxMemoryMB } : {}),
  ...(l?.maxDiskMB !== undefined ? { maxDiskMB: l.maxDiskMB } : {}),
});

/**
 * The API's own lines about requests: one when each is answered, with its
 * path but never its query (signed URLs carry their signature there), its
 * status, time and key id. fastify's would log the whole URL.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, req: FastifyRequest, reply: FastifyReply): void {
    const keyID = callerOfRequest.get(req)?.keyId;
    const line = { method: req.method, path: pathOf(req.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, ...(keyID ? { keyID } : {}) };
    if (error) req.log.error({ ...line, err: error }, 'request ended in error');
    else req.log.info(line, 'request');
  }

  override defaultErrorLog(error: Error, req: FastifyRequest, reply: FastifyReply): void {
    req.log[reply.statusCode >= 500 ? 'error' : 'info']({ method: req.method, path: pathOf(req.url), status: reply.statusCode, err: error }, error.message);
  }
}

function handlers({ sandboxes, templates, keys, teams, usage, metrics, health, dashboard }: ApiDeps): Handlers {
  const team = async (t: TeamRecord) => ({ teamID: t.id, name: t.name, createdAt: iso(t.createdAt), limits: t.limits, usage: await usage(t.id) });
  const requireTeam = async (id: string) => {
    const t = await teams.get(id);
    if (!t) throw new ApiError(404, `team '${id}' not found`);
    return t;
  };
  return {
    postDashboardSession: ({ body }) => (dashboard ? dashboard.api.signIn(body.key) : dashboardOff()),
    getDashboardSession: ({ session }) => (dashboard ? dashboard.api.current(session) : dashboardOff()),
    deleteDashboardSession: ({ session }) => (dashboard ? dashboard.api.signOut(session) : dashboardOff()),

    getHealth: () => ({ status: 204 }),
    getHealthLive: () => ({ status: 200, body: { status: 'ok', checks: {} } }),
    getHealthReady: async () => {
      const report = await health.ready();
      return report.status === 'ok' ? { status: 200, body: report } : { status: 503, body: report };
    },
    getMetrics: async () => ({ status: 200, body: await metrics.text(), headers: { 'content-type': metrics.contentType } }),

    getSandboxes: async ({ query, caller }) => ({ status: 200, body: await sandboxes.listRunning(caller, query.metadata) }),
    postSandboxes: async ({ body, caller }) => ({ status: 201, body: await sandboxes.create(caller, body) }),
    postV2Sandboxes: async ({ body, caller }) => ({ status: 201, body: await sandboxes.create(caller, body) }),
    getV2Sandboxes: async ({ query, caller }) => {
      const page = await sandboxes.list(caller, query);
      return { status: 200, body: page.items, headers: { 'X-Total-Running': String(page.totalRunning), ...nextTokenHeader(page) } };
    },
    // `sandbox_ids=a,b` (explode false in the spec) is split before validation,
    // as is the repeated form `sandbox_ids=a&sandbox_ids=b`.
    getSandboxesMetrics: async ({ query, caller }) => ({ status: 200, body: await sandboxes.latestMetrics(caller, query.sandbox_ids) }),
    getSandboxesSandboxID: async ({ params, caller }) => ({ status: 200, body: await sandboxes.detail(caller, params.sandboxID) }),
    deleteSandboxesSandboxID: async ({ params, caller }) => {
      await sandboxes.kill(caller, params.sandboxID);
      return { status: 204 };
    },
    getSandboxesSandboxIDLogs: async ({ params, query, caller }) => ({ status: 200, body: await sandboxes.logs(caller, params.sandboxID, query) }),
    getV2SandboxesSandboxIDLogs: async ({ params, query, caller }) => ({ status: 200, body: await sandboxes.logsV2(caller, params.sandboxID, query) }),
    getSandboxesSandboxIDMetrics: async ({ params, query, caller }) => ({ status: 200, body: await sandboxes.metrics(caller, params.sandboxID, query.start, query.end) }),
    postSandboxesSandboxIDPause: async ({ params, body, caller }) => {
      await sandboxes.pause(caller, params.sandboxID, body?.memory ?? true);
      return { status: 204 };
    },
    postSandboxesSandboxIDResume: async ({ params, body, caller }) => ({ status: 201, body: await sandboxes.resume(caller, params.sandboxID, body.timeout) }),
    postSandboxesSandboxIDConnect: async ({ params, body, caller }) => {
      const { sandbox, resumed } = await sandboxes.connect(caller, params.sandboxID, body.timeout);
      return resumed ? { status: 201, body: sandbox } : { status: 200, body: sandbox };
    },
    postV2SandboxesSandboxIDConnect: async ({ params, body, caller }) => {
      const { sandbox, resumed } = await sandboxes.connect(caller, params.sandboxID, body.timeout, body.memory ?? true);
      return resumed ? { status: 201, body: sandbox } : { status: 200, body: sandbox };
    },
    postSandboxesSandboxIDTimeout: async ({ params, body, caller }) => {
      if (body?.timeout === undefined) throw new ApiError(400, "body must have required property 'timeout'");
      await sandboxes.setTimeout(caller, params.sandboxID, body.timeout);
      return { status: 204 };
    },
    putSandboxesSandboxIDNetwork: async ({ params, body, caller }) => {
      await sandboxes.updateNetwork(caller, params.sandboxID, body);
      return { status: 204 };
    },
    postSandboxesSandboxIDRefreshes: async ({ params, body, caller }) => {
      await sandboxes.refresh(caller, params.sandboxID, body?.duration);
      return { status: 204 };
    },
    postSandboxesSandboxIDFork: async ({ params, body, caller }) => ({
      status: 201,
      body: await sandboxes.fork(caller, params.sandboxID, body?.count ?? 1, body?.timeout),
    }),
    postSandboxesSandboxIDSnapshots: async ({ params, body, caller }) => {
      const t = await sandboxes.snapshot(caller, params.sandboxID, body.name);
      return { status: 201, body: { snapshotID: t.id, names: t.names } };
    },
    getSnapshots: async ({ query, caller }) => {
      const page = await templates.snapshots(caller, query);
      return { status: 200, body: page.items, headers: nextTokenHeader(page) };
    },

    getTemplates: async ({ caller }) => ({ status: 200, body: await templates.list(caller) }),
    postTemplates: notImplemented,
    postV3Templates: async ({ body, caller }) => ({ status: 202, body: await templates.requestBuild(caller, body) }),
    getTemplatesTemplateID: async ({ params, query, caller }) => {
      const { body, nextToken } = await templates.withBuilds(caller, params.templateID, query);
      return { status: 200, body, headers: nextTokenHeader({ nextToken }) };
    },
    deleteTemplatesTemplateID: async ({ params, caller }) => {
      await templates.remove(caller, params.templateID);
      return { status: 204 };
    },
    patchTemplatesTemplateID: async ({ params, body, caller }) => {
      await templates.setPublic(caller, params.templateID, body.public);
      return { status: 200 };
    },
    patchV2TemplatesTemplateID: async ({ params, body, caller }) => ({ status: 200, body: await templates.setPublic(caller, params.templateID, body.public) }),
    getTemplatesTemplateIDFilesHash: async ({ params, origin, caller }) => ({ status: 201, body: await templates.fileUpload(caller, params.templateID, params.hash, origin) }),
    postV2TemplatesTemplateIDBuildsBuildID: async ({ params, body, caller }) => {
      await templates.startBuild(caller, params.templateID, params.buildID, body);
      return { status: 202 };
    },
    postTemplatesTemplateIDRebuild: async ({ params, caller }) => ({ status: 202, body: await templates.rebuild(caller, params.templateID) }),
    getTemplatesTemplateIDBuildsBuildIDStatus: async ({ params, query, caller }) => ({ status: 200, body: await templates.buildStatus(caller, params.templateID, params.buildID, query) }),
    getTemplatesTemplateIDBuildsBuildIDLogs: async ({ params, query, caller }) => ({ status: 200, body: await templates.buildLogs(caller, params.templateID, params.buildID, query) }),
    postTemplatesTags: async ({ body, caller }) => ({ status: 201, body: await templates.assignTags(caller, body.target, body.tags) }),
    deleteTemplatesTags: async ({ body, caller }) => {
      await templates.deleteTags(caller, body.name, body.tags);
      return { status: 204 };
    },
    getTemplatesTemplateIDTags: async ({ params, caller }) => ({ status: 200, body: await templates.tags(caller, params.templateID) }),
    getTemplatesAliasesAlias: async ({ params, caller }) => ({ status: 200, body: await templates.byAlias(caller, params.alias) }),

    getApiKeys: async ({ caller }) => ({ status: 200, body: (await keys.list(scopeOf(caller))).map(listedKey) }),
    postApiKeys: async ({ body, caller }) => {
      const { record, key } = await keys.create(teamOfCaller(caller, 'has no keys of its own'), body.name);
      return { status: 201, body: { ...listedKey(record), key } };
    },
    patchApiKeysApiKeyID: async ({ params, body, caller }) => {
      await keys.rename(scopeOf(caller), params.apiKeyID, body.name);
      return { status: 200 };
    },
    deleteApiKeysApiKeyID: async ({ params, caller }) => {
      await keys.remove(scopeOf(caller), params.apiKeyID);
      return { status: 204 };
    },

    getAdminTeams: async () => ({ status: 200, body: await Promise.all((await teams.list()).map(team)) }),
    postAdminTeams: async ({ body }) => ({ status: 201, body: await team(await teams.create(body.name, limitsOf(body.limits))) }),
    getAdminTeamsTeamID: async ({ params }) => ({ status: 200, body: await team(await requireTeam(params.teamID)) }),
    deleteAdminTeamsTeamID: async ({ params }) => {
      await teams.remove(params.teamID);
      return { status: 204 };
    },
    patchAdminTeamsTeamIDLimits: async ({ params, body }) => ({ status: 200, body: await team(await teams.setLimits(params.teamID, limitsOf(body))) }),
    getAdminTeamsTeamIDApiKeys: async ({ params }) => {
      await requireTeam(params.teamID);
      return { status: 200, body: (await keys.list({ teamId: params.teamID })).map(listedKey) };
    },
    postAdminTeamsTeamIDApiKeys: async ({ params, body }) => {
      const { record, key } = await keys.create((await requireTeam(params.teamID)).id, body.name);
      return { status: 201, body: { ...listedKey(record), key } };
    },
    deleteAdminTeamsTeamIDApiKeysApiKeyID: async ({ params }) => {
      await requireTeam(params.teamID);
      await keys.remove({ teamId: params.teamID }, params.apiKeyID);
      return { status: 204 };
    },
  };
}

function sendError(reply: FastifyReply, e: ApiError): FastifyReply {
  return reply.code(e.status).headers(e.headers).type('application/json').send(errorBody(e));
}

/**
 * A request without a valid key gets its answer at once, and the connection
 * closes after it: its body is not waited for, and a client that has no key
 * holds no connection.
 */
function unauthorized(reply: FastifyReply, message: string): FastifyReply {
  return sendError(reply.header('connection', 'close'), new ApiError(401, message));
}

/** Node looks for requests past their timeouts this often (every 30 s unless told). */
const TIMEOUT_CHECK_MS = 1_000;

/**
 * Answers a request that Node could not read (one past its timeout, one that
 * is not HTTP) with the API's error body, and closes its connection.
 */
function clientErrorHandler(limits: ConnectionLimits, requestTimeout: number) {
  return (err: ConnectionError, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, `the request did not arrive in time: its head must arrive within ${limits.headerTimeoutMs} ms, all of it within ${requestTimeout} ms`]
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'the request head is too large']
          : [400, `the request is not valid HTTP/1.1: ${err.message}`];
    const body = JSON.stringify(errorBody(new ApiError(status, message)));
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}

export function createApi(operations: Operation[], deps: ApiDeps, limits: ConnectionLimits & { corsOrigins: string[]; tls?: SecureContextOptions }): FastifyInstance {
  // Receiving a request is timed, answering it is not: a fork or a snapshot
  // may take long, and nothing cuts it off. The bodies are small JSON, so the
  // whole request has one deadline: Node's requestTimeout, which fastify sets
  // from its own option (0 would turn it off), after Node has checked its
  // http options against one another.
  const requestTimeout = limits.headerTimeoutMs + limits.bodyTimeoutMs;
  // Over TLS, Node's https server (fastify's types follow the server's kind; the routes do not care which).
  const app = (Fastify as unknown as (opts: FastifyHttpOptions<HttpServer, Logger> & { https?: SecureContextOptions }) => FastifyInstance)({
    ...(limits.tls ? { https: limits.tls } : {}),
    loggerInstance: deps.log,
    logController: new AccessLog(),
    genReqId: (req) => requestId(req.headers['x-request-id']),
    bodyLimit: 1024 * 1024,
    requestTimeout,
    keepAliveTimeout: limits.idleTimeoutMs,
    http: { headersTimeout: limits.headerTimeoutMs, requestTimeout, connectionsCheckingInterval: TIMEOUT_CHECK_MS },
    clientErrorHandler: clientErrorHandler(limits, requestTimeout),
    // Closing waits for requests under way (the server cuts them at its deadline); idle connections go at once.
    forceCloseConnections: 'idle',
    // Refused below, with the API's error body.
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
  });
  limitConnectionsPerAddress(app.server, limits.maxConnectionsPerAddress);
  if (deps.dashboard) void app.register(fastifyCookie);
  // Pages in browsers run the official SDK against this API, as against E2B's (any origin unless configured).
  if (limits.corsOrigins.length) {
    void app.register(fastifyCors, {
      origin: limits.corsOrigins.includes('*') ? '*' : limits.corsOrigins,
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
      // The SDKs page lists by it; a page may quote a request's id.
      exposedHeaders: ['X-Next-Token', 'X-Request-Id'],
      maxAge: 7200,
    });
  }

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (deps.stopping()) return sendError(reply.header('connection', 'close'), new ApiError(503, 'the server is shutting down; retry once it is back'));
    return undefined;
  });
  // Query and path values arrive as strings and are coerced to the schema's
  // types; JSON bodies are checked exactly (`"templateID": 5` is an error).
  const ajvOptions: Options = {
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    // OpenAPI formats that JSON Schema does not know; the types already say enough.
    formats: { int32: true, int64: true, float: true, double: true, binary: true },
    keywords: ['example'],
  };
  const coercing = ajvFormats(new Ajv({ ...ajvOptions, coerceTypes: 'array' }));
  const exact = ajvFormats(new Ajv({ ...ajvOptions, coerceTypes: false }));
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? exact : coercing).compile(schema));

  // An empty body with a JSON content type is no body, as the operations
  // with optional bodies expect; anything else goes through the safe parser.
  // JSON is the only body the control API takes; anything else is 415.
  const jsonParser = app.getDefaultJsonParser('error', 'ignore');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (typeof body === 'string' && body.trim() === '') return done(null, undefined);
    jsonParser(req, body as string, done);
  });

  app.setErrorHandler((err: FastifyError | ApiError, req: FastifyRequest, reply: FastifyReply) => {
    const e = toApiError(err);
    // An ApiError is an answer chosen on purpose (501, 503 while closing); anything else failing is worth a trace.
    if (e.status >= 500 && !(err instanceof ApiError)) req.log.error({ err, method: req.method, path: pathOf(req.url) }, 'request failed');
    return sendError(reply, e);
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, new ApiError(404, `no route for ${req.method} ${req.url.split('?')[0]}`)));

  // Each handler was checked against its own operation above; here they are
  // only dispatched by operationId.
  type Result = { status: number; body?: unknown; headers?: Record<string, string> };
  const table = handlers(deps) as unknown as Record<string, (call: { params: unknown; query: unknown; body: unknown; origin: string; caller?: Caller; session?: SessionRef }) => Promise<Result> | Result>;
  for (const op of operations) {
    const handle = table[op.operationId];
    if (!handle) throw new Error(`no handler for operation '${op.operationId}' of the spec`);
    app.route({
      method: op.method,
      url: op.routePath,
      schema: op.schema,
      onRequest: async (req, reply) => {
        if (op.public) return;
        const who = await deps.auth.identify(req.headers, { bearer: op.bearerKey, method: req.method });
        if (who.kind === 'none') return unauthorized(reply, 'missing X-API-Key header');
        if (who.kind === 'refused') return who.status === 403 ? sendError(reply, new ApiError(403, who.message)) : unauthorized(reply, who.message);
        callerOfRequest.set(req, who.caller);
        if (op.admin && !who.caller.admin) {
          return sendError(reply.header('connection', 'close'), new ApiError(403, `${op.method} ${op.path} takes the admin credential only, not an API key of a team`));
        }
        return undefined;
      },
      preValidation: async (req) => {
        // `state=running,paused`: one value, comma-separated (style form, explode false).
        const query = req.query as Record<string, unknown>;
        for (const name of op.commaArrays) {
          const v = query[name];
          if (typeof v === 'string') query[name] = v.split(',').filter(Boolean);
          else if (Array.isArray(v)) query[name] = v.flatMap((x) => String(x).split(',')).filter(Boolean);
        }
        if (req.body === undefined && op.schema.body) {
          if (op.bodyRequired) throw new ApiError(400, 'a JSON request body is required');
          req.body = {};
        }
      },
      handler: async (req, reply) => {
        const result = await withLog(req.log, () =>
          handle({
            params: req.params,
            query: req.query,
            body: req.body,
            origin: `${req.protocol}://${req.host}`,
            caller: callerOfRequest.get(req),
            session: deps.dashboard?.api.sessionOf(req.headers),
          }),
        );
        if (result.headers) reply.headers(result.headers);
        reply.code(result.status);
        return 'body' in result ? reply.send(result.body) : reply.send();
      },
    });
  }
  registerUploads(app, deps.templates);
  if (deps.dashboard) registerDashboardAssets(app, deps.dashboard.assets, deps.dashboard.domain);
  return app;
}

/**
 * `PUT /templates/{id}/files/{hash}/upload?expires&signature`: where a
 * client uploads the archive of a COPY step, at the signed URL that
 * `GET /templates/{id}/files/{hash}` gave it (no API key: the URL is the
 * authority). Its body, of any type, is streamed to the build files.
 */
function registerUploads(app: FastifyInstance, templates: Templates): void {
  void app.register(async (uploads) => {
    uploads.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    uploads.put<{ Params: { templateID: string; hash: string }; Querystring: { expires?: string; signature?: string } }>(
      '/templates/:templateID/files/:hash/upload',
      async (req, reply) => {
        const body = req.body as Readable | undefined;
        if (!body) throw new ApiError(400, 'the upload has no body');
        await templates.receiveFiles(req.params.templateID, req.params.hash, req.query, body);
        return reply.code(201).send();
      },
    );
  });
}
