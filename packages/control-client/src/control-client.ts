import createClient, { type Client } from 'openapi-fetch';
import type { paths } from '@paddock/models/control';
import { ControlApiError, errorFromFailure, errorFromResponse } from './errors.js';
import { encodeMetadataFilter } from './metadata-filter.js';
import { Paginator, type Page } from './paginator.js';
import { defaultRetryPolicy, ReplayableRequest, sendWithRetries, type FetchFunction, type RetryPolicy } from './retry.js';
import type {
  AssignedTemplateTags,
  AssignTemplateTagsRequest,
  ConnectSandboxV2,
  CreatedTeamAPIKey,
  DeleteTemplateTagsRequest,
  ListedSandbox,
  LogLevel,
  LogsDirection,
  LogsSource,
  NewSandbox,
  NewTeam,
  NewTeamAPIKey,
  OrderDirection,
  ResumedSandbox,
  Sandbox,
  SandboxDetail,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxLogsV2Response,
  SandboxMetric,
  SandboxNetworkUpdateConfig,
  SandboxPauseRequest,
  SandboxRefreshRequest,
  SandboxSnapshotRequest,
  SandboxState,
  SandboxTimeoutRequest,
  SnapshotInfo,
  Team,
  TeamAPIKey,
  TeamLimits,
  Template,
  TemplateAliasResponse,
  TemplateBuild,
  TemplateBuildFileUpload,
  TemplateBuildInfo,
  TemplateBuildLogsResponse,
  TemplateBuildRequestV3,
  TemplateBuildStartV2,
  TemplateRequestResponseV3,
  TemplateTag,
  TemplateWithBuilds,
  UpdateTeamAPIKey,
} from './types.js';

/** Deadline of each call when `requestTimeoutMs` is not given, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** Options of `new ControlClient`. */
export interface ControlClientOptions {
  /** Base URL of the control API, e.g. `http://127.0.0.1:3000`. A path prefix is kept. */
  apiUrl: string;
  /** Sent as `X-API-Key`. */
  apiKey?: string;
  /** Deadline of each call, retries and body included; 0 for none. Default 60 000. */
  requestTimeoutMs?: number;
  /** Aborts every call of this client. */
  signal?: AbortSignal;
  /** Retry policy; fields not given keep their defaults (`defaultRetryPolicy`). */
  retries?: Partial<RetryPolicy>;
  /** Extra headers on every call. */
  headers?: Record<string, string>;
  /** Replaces the global fetch. */
  fetch?: FetchFunction;
}

/** Options of a single call. */
export interface CallOptions {
  /** Aborts this call. */
  signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs` for this call. */
  requestTimeoutMs?: number;
  /** Extra headers for this call. */
  headers?: Record<string, string>;
}

/** Filters of `GET /v2/sandboxes`. */
export interface ListSandboxesQuery {
  /** Only sandboxes whose metadata contains all of these pairs. */
  metadata?: Record<string, string>;
  /** Only sandboxes in these states; both when omitted. */
  state?: SandboxState[];
  /** By start time; newest first when omitted. */
  order?: OrderDirection;
  /** Only sandboxes started at or after this time (a Date, or an RFC 3339 string). */
  startedAfter?: Date | string;
  /** Only sandboxes of this template. */
  template?: string;
  /** Page size (server default 100). */
  limit?: number;
  /** Cursor of the page to start from. */
  nextToken?: string;
}

/** Filters of `GET /snapshots`. */
export interface ListSnapshotsQuery {
  /** Only snapshots taken from this sandbox. */
  sandboxID?: string;
  /** Only snapshots with this name. */
  name?: string;
  /** Page size. */
  limit?: number;
  /** Cursor of the page to start from. */
  nextToken?: string;
}

/** Paging of a template's builds in `GET /templates/{templateID}`. */
export interface TemplateBuildsQuery {
  /** Page size. */
  limit?: number;
  /** Cursor of the page to start from. */
  nextToken?: string;
}

/** Time range of `GET /sandboxes/{sandboxID}/metrics`. */
export interface SandboxMetricsQuery {
  /** Unix seconds. */
  start?: number;
  /** Unix seconds. */
  end?: number;
}

/** Query of `GET /v2/sandboxes/{sandboxID}/logs`. */
export interface SandboxLogsQuery {
  /** Unix milliseconds to start reading from. */
  cursor?: number;
  /** Most entries to return (server default 1000). */
  limit?: number;
  /** Read towards newer (`forward`) or older (`backward`) entries. */
  direction?: LogsDirection;
  /** Lowest severity to include. */
  level?: LogLevel;
  /** Only entries whose message contains this text. */
  search?: string;
}

/** Query of `GET /templates/{templateID}/builds/{buildID}/status`. */
export interface TemplateBuildStatusQuery {
  /** Index of the first log entry to include (0 for all). */
  logsOffset?: number;
  /** Most log entries to include (server default 100). */
  limit?: number;
  /** Lowest severity of the entries included. */
  level?: LogLevel;
}

/** Query of `GET /templates/{templateID}/builds/{buildID}/logs`. */
export interface TemplateBuildLogsQuery {
  /** Unix milliseconds to start reading from. */
  cursor?: number;
  /** Most entries to return (server default 100). */
  limit?: number;
  /** Read towards newer (`forward`) or older (`backward`) entries. */
  direction?: LogsDirection;
  /** Lowest severity to include. */
  level?: LogLevel;
  /** The short-lived live buffer (`temporary`) or long-term storage (`persistent`). */
  source?: LogsSource;
}

/**
 * The archive `uploadTemplateFiles` sends: a file's path (Node only), or a
 * body of known size; the Node build's client also takes a Node `Readable`.
 * A path or a Blob is sent again when a retry is worth it; a stream is sent
 * once.
 */
export type TemplateFilesBody = string | Blob | ReadableStream<Uint8Array>;

/** What `connectSandbox` returns. */
export interface ConnectResult {
  /** The sandbox's connection record. */
  sandbox: Sandbox;
  /** True when the sandbox was paused and has been resumed (201), false when it was running (200). */
  resumed: boolean;
}

/** What `getTemplate` returns: the template with one page of its builds. */
export interface TemplatePage {
  /** The template and one page of its builds. */
  template: TemplateWithBuilds;
  /** Cursor of the next page of builds. */
  nextToken: string | undefined;
}

/** What openapi-fetch resolves to, reduced to what this client reads. */
type Outcome<D> = { data: D; error?: never; response: Response } | { data?: never; error: unknown; response: Response };

interface CallSetup extends CallOptions {
  /** The operation is idempotent although its method is not (e.g. setting an absolute expiry). */
  idempotent?: boolean;
  /** Disables retries, for calls whose failure is itself the answer. */
  noRetry?: boolean;
}

/** What each typed call hands to openapi-fetch besides params and body. */
type CallInit = {
  fetch: FetchFunction;
  signal: AbortSignal | undefined;
  headers: Record<string, string> | undefined;
};

/**
 * Typed client of the control API. Each method is one operation of
 * `openapi/control.yaml` and takes and returns its wire types; failures throw
 * `ControlApiError`. `api` is the underlying openapi-fetch client (same base
 * URL, API key, timeout and retries) for operations without a method here;
 * it returns openapi-fetch's `{data, error, response}` and does not throw on
 * HTTP errors.
 */
export class ControlClient {
  /** The underlying openapi-fetch client, for operations without a method here; it does not throw on HTTP errors. */
  readonly api: Client<paths>;
  readonly #fetch: FetchFunction;
  readonly #policy: RetryPolicy;
  readonly #timeoutMs: number;
  readonly #signal: AbortSignal | undefined;

  constructor(options: ControlClientOptions) {
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#policy = { ...defaultRetryPolicy, ...options.retries };
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#signal = options.signal;
    const headers: Record<string, string> = { ...options.headers };
    if (options.apiKey !== undefined) headers['X-API-Key'] = options.apiKey;
    this.api = createClient<paths>({
      baseUrl: options.apiUrl,
      headers,
      fetch: this.#transport({}),
      Request: ReplayableRequest,
      // `state` is a comma list (style form, explode false), as the spec says.
      querySerializer: { array: { style: 'form', explode: false } },
    });
  }

  // --- sandboxes -----------------------------------------------------------

  /** `POST /v2/sandboxes`. */
  async createSandbox(body: NewSandbox, options?: CallOptions): Promise<Sandbox> {
    return this.#json('POST', '/v2/sandboxes', options, (init) => this.api.POST('/v2/sandboxes', { ...init, body }));
  }

  /** `GET /v2/sandboxes`: one page. */
  async listSandboxes(query: ListSandboxesQuery = {}, options?: CallOptions): Promise<Page<ListedSandbox>> {
    const { data, response } = await this.#call('GET', '/v2/sandboxes', options, (init) =>
      this.api.GET('/v2/sandboxes', { ...init, params: { query: sandboxListQuery(query) } }),
    );
    return { items: expectBody(data, 'GET', response), nextToken: nextToken(response) };
  }

  /** Every sandbox matching `query`, page by page from `query.nextToken`. */
  paginateSandboxes(query: ListSandboxesQuery = {}, options?: CallOptions): Paginator<ListedSandbox> {
    return new Paginator((token) => this.listSandboxes({ ...query, nextToken: token }, options), query.nextToken);
  }

  /** `GET /sandboxes/{sandboxID}`. */
  async getSandbox(sandboxID: string, options?: CallOptions): Promise<SandboxDetail> {
    return this.#json('GET', '/sandboxes/{sandboxID}', options, (init) =>
      this.api.GET('/sandboxes/{sandboxID}', { ...init, params: { path: { sandboxID } } }),
    );
  }

  /** `DELETE /sandboxes/{sandboxID}`. A missing sandbox throws with kind `not_found`. */
  async killSandbox(sandboxID: string, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/sandboxes/{sandboxID}', options, (init) =>
      this.api.DELETE('/sandboxes/{sandboxID}', { ...init, params: { path: { sandboxID } } }),
    );
  }

  /**
   * `POST /v2/sandboxes/{sandboxID}/connect`: resumes a paused sandbox. Retried
   * like an idempotent call: a repeat after a resume that did happen answers
   * 200, so `resumed` can then be false although this call resumed it.
   * Without `timeout` a running sandbox keeps its expiry; `memory: false`
   * starts a paused one afresh on its kept filesystem.
   */
  async connectSandbox(sandboxID: string, body: ConnectSandboxV2 = {}, options?: CallOptions): Promise<ConnectResult> {
    const { data, response } = await this.#call(
      'POST',
      '/v2/sandboxes/{sandboxID}/connect',
      { ...options, idempotent: true },
      (init) => this.api.POST('/v2/sandboxes/{sandboxID}/connect', { ...init, params: { path: { sandboxID } }, body }),
    );
    return { sandbox: expectBody(data, 'POST', response), resumed: response.status === 201 };
  }

  /** `POST /sandboxes/{sandboxID}/pause`. Not running throws with kind `conflict`. */
  async pauseSandbox(sandboxID: string, body: SandboxPauseRequest = {}, options?: CallOptions): Promise<void> {
    await this.#call('POST', '/sandboxes/{sandboxID}/pause', options, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/pause', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `POST /sandboxes/{sandboxID}/resume` (legacy; `connectSandbox` supersedes it). */
  async resumeSandbox(sandboxID: string, body: ResumedSandbox = {}, options?: CallOptions): Promise<Sandbox> {
    return this.#json('POST', '/sandboxes/{sandboxID}/resume', options, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/resume', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `POST /sandboxes/{sandboxID}/timeout`: expiry = now + `timeout` seconds. Retried: it sets an absolute value. */
  async setTimeout(sandboxID: string, body: SandboxTimeoutRequest, options?: CallOptions): Promise<void> {
    await this.#call('POST', '/sandboxes/{sandboxID}/timeout', { ...options, idempotent: true }, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/timeout', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `POST /sandboxes/{sandboxID}/refreshes`: keep alive `duration` more seconds. Retried: it sets an absolute value. */
  async refresh(sandboxID: string, body: SandboxRefreshRequest = {}, options?: CallOptions): Promise<void> {
    await this.#call('POST', '/sandboxes/{sandboxID}/refreshes', { ...options, idempotent: true }, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/refreshes', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `PUT /sandboxes/{sandboxID}/network`. */
  async updateNetwork(sandboxID: string, body: SandboxNetworkUpdateConfig, options?: CallOptions): Promise<void> {
    await this.#call('PUT', '/sandboxes/{sandboxID}/network', options, (init) =>
      this.api.PUT('/sandboxes/{sandboxID}/network', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `GET /sandboxes/{sandboxID}/metrics`. */
  async getSandboxMetrics(
    sandboxID: string,
    query: SandboxMetricsQuery = {},
    options?: CallOptions,
  ): Promise<SandboxMetric[]> {
    return this.#json('GET', '/sandboxes/{sandboxID}/metrics', options, (init) =>
      this.api.GET('/sandboxes/{sandboxID}/metrics', { ...init, params: { path: { sandboxID }, query } }),
    );
  }

  /** `GET /v2/sandboxes/{sandboxID}/logs`. */
  async getSandboxLogs(
    sandboxID: string,
    query: SandboxLogsQuery = {},
    options?: CallOptions,
  ): Promise<SandboxLogsV2Response> {
    return this.#json('GET', '/v2/sandboxes/{sandboxID}/logs', options, (init) =>
      this.api.GET('/v2/sandboxes/{sandboxID}/logs', { ...init, params: { path: { sandboxID }, query } }),
    );
  }

  /** `POST /sandboxes/{sandboxID}/fork`. */
  async forkSandbox(
    sandboxID: string,
    body: SandboxForkRequest = {},
    options?: CallOptions,
  ): Promise<SandboxForkResult[]> {
    return this.#json('POST', '/sandboxes/{sandboxID}/fork', options, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/fork', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  // --- snapshots -----------------------------------------------------------

  /** `POST /sandboxes/{sandboxID}/snapshots`. */
  async createSnapshot(
    sandboxID: string,
    body: SandboxSnapshotRequest = {},
    options?: CallOptions,
  ): Promise<SnapshotInfo> {
    return this.#json('POST', '/sandboxes/{sandboxID}/snapshots', options, (init) =>
      this.api.POST('/sandboxes/{sandboxID}/snapshots', { ...init, params: { path: { sandboxID } }, body }),
    );
  }

  /** `GET /snapshots`: one page. */
  async listSnapshots(query: ListSnapshotsQuery = {}, options?: CallOptions): Promise<Page<SnapshotInfo>> {
    const { data, response } = await this.#call('GET', '/snapshots', options, (init) =>
      this.api.GET('/snapshots', { ...init, params: { query } }),
    );
    return { items: expectBody(data, 'GET', response), nextToken: nextToken(response) };
  }

  /** Every snapshot matching `query`, page by page. */
  paginateSnapshots(query: ListSnapshotsQuery = {}, options?: CallOptions): Paginator<SnapshotInfo> {
    return new Paginator((token) => this.listSnapshots({ ...query, nextToken: token }, options), query.nextToken);
  }

  // --- templates -----------------------------------------------------------

  /** `GET /templates`. */
  async listTemplates(query: { teamID?: string } = {}, options?: CallOptions): Promise<Template[]> {
    return this.#json('GET', '/templates', options, (init) => this.api.GET('/templates', { ...init, params: { query } }));
  }

  /** `GET /templates/{templateID}`: the template and one page of its builds. */
  async getTemplate(templateID: string, query: TemplateBuildsQuery = {}, options?: CallOptions): Promise<TemplatePage> {
    const { data, response } = await this.#call('GET', '/templates/{templateID}', options, (init) =>
      this.api.GET('/templates/{templateID}', { ...init, params: { path: { templateID }, query } }),
    );
    return { template: expectBody(data, 'GET', response), nextToken: nextToken(response) };
  }

  /** Every build of a template, page by page. */
  paginateTemplateBuilds(
    templateID: string,
    query: TemplateBuildsQuery = {},
    options?: CallOptions,
  ): Paginator<TemplateBuild> {
    return new Paginator(async (token) => {
      const page = await this.getTemplate(templateID, { ...query, nextToken: token }, options);
      return { items: page.template.builds, nextToken: page.nextToken };
    }, query.nextToken);
  }

  /** `DELETE /templates/{templateID}` (also deletes a snapshot, which is a template). */
  async deleteTemplate(templateID: string, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/templates/{templateID}', options, (init) =>
      this.api.DELETE('/templates/{templateID}', { ...init, params: { path: { templateID } } }),
    );
  }

  /** `GET /templates/aliases/{alias}`. */
  async getTemplateByAlias(alias: string, options?: CallOptions): Promise<TemplateAliasResponse> {
    return this.#json('GET', '/templates/aliases/{alias}', options, (init) =>
      this.api.GET('/templates/aliases/{alias}', { ...init, params: { path: { alias } } }),
    );
  }

  /** `POST /templates/tags`. */
  async assignTemplateTags(body: AssignTemplateTagsRequest, options?: CallOptions): Promise<AssignedTemplateTags> {
    return this.#json('POST', '/templates/tags', options, (init) =>
      this.api.POST('/templates/tags', { ...init, body }),
    );
  }

  /** `DELETE /templates/tags`. */
  async deleteTemplateTags(body: DeleteTemplateTagsRequest, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/templates/tags', options, (init) => this.api.DELETE('/templates/tags', { ...init, body }));
  }

  /** `GET /templates/{templateID}/tags`. */
  async listTemplateTags(templateID: string, options?: CallOptions): Promise<TemplateTag[]> {
    return this.#json('GET', '/templates/{templateID}/tags', options, (init) =>
      this.api.GET('/templates/{templateID}/tags', { ...init, params: { path: { templateID } } }),
    );
  }

  // --- template builds -----------------------------------------------------

  /**
   * `POST /v3/templates`: reserves a new build of the template `name`
   * (`name:tag` tags it), making the template if it is new. Not retried: a
   * repeat would reserve a second build.
   */
  async requestTemplateBuild(body: TemplateBuildRequestV3, options?: CallOptions): Promise<TemplateRequestResponseV3> {
    return this.#json('POST', '/v3/templates', options, (init) => this.api.POST('/v3/templates', { ...init, body }));
  }

  /**
   * `POST /templates/{templateID}/rebuild` (Paddock's): makes the base
   * template's image again, as a build of it followed like any build. Not
   * retried: a repeat would be refused while the first runs.
   */
  async rebuildTemplate(templateID: string, options?: CallOptions): Promise<TemplateRequestResponseV3> {
    return this.#json('POST', '/templates/{templateID}/rebuild', options, (init) =>
      this.api.POST('/templates/{templateID}/rebuild', { ...init, params: { path: { templateID } } }),
    );
  }

  /**
   * `GET /templates/{templateID}/files/{hash}`: whether the server has the
   * files of a COPY step, and where to upload them when it has not.
   */
  async templateFileUpload(templateID: string, hash: string, options?: CallOptions): Promise<TemplateBuildFileUpload> {
    return this.#json('GET', '/templates/{templateID}/files/{hash}', options, (init) =>
      this.api.GET('/templates/{templateID}/files/{hash}', { ...init, params: { path: { templateID, hash } } }),
    );
  }

  /**
   * The archive as fetch sends it. This build (the browser's) takes a Blob or
   * a Web stream; the Node build's client adds a path and a Node `Readable`.
   */
  protected async archiveBody(files: TemplateFilesBody): Promise<Blob | ReadableStream<Uint8Array>> {
    if (files instanceof Blob || (typeof files === 'object' && typeof (files as ReadableStream).getReader === 'function')) {
      return files as Blob | ReadableStream<Uint8Array>;
    }
    throw new TypeError('uploadTemplateFiles takes a path or a Node Readable only in Node; in a browser pass a Blob or a ReadableStream');
  }

  /**
   * PUTs a tar archive (gzip-compressed or not) to the upload URL that
   * `templateFileUpload` gave, with its Content-Length. The URL carries its
   * own signature, so neither the API key nor the client's headers go with
   * it (only this call's `headers`). `size` is required for a stream.
   */
  async uploadTemplateFiles(url: string, files: TemplateFilesBody, size?: number, options?: CallOptions): Promise<void> {
    const body = await this.archiveBody(files);
    const length = body instanceof Blob ? body.size : size;
    if (length === undefined || !Number.isSafeInteger(length) || length < 0) {
      throw new TypeError('uploadTemplateFiles needs the size of a stream, in bytes');
    }
    if (body instanceof Blob && size !== undefined && size !== body.size) {
      throw new TypeError(`uploadTemplateFiles was given size ${size}, but the archive has ${body.size} bytes`);
    }
    await this.#call('PUT', new URL(url).pathname, options, async (init) => {
      const request = new ReplayableRequest(url, {
        method: 'PUT',
        body,
        // A stream is sent as it is read.
        duplex: 'half',
        headers: { ...init.headers, 'content-type': 'application/octet-stream', 'content-length': String(length) },
        signal: init.signal,
      } as RequestInit);
      const response = await init.fetch(request);
      if (response.ok) {
        await response.body?.cancel().catch(() => undefined);
        return { data: undefined, response };
      }
      return { error: await errorBody(response), response };
    });
  }

  /**
   * `POST /v2/templates/{templateID}/builds/{buildID}`: starts a reserved
   * build; it runs in the background. Not retried: a started build refuses a
   * second start.
   */
  async startTemplateBuild(templateID: string, buildID: string, body: TemplateBuildStartV2, options?: CallOptions): Promise<void> {
    await this.#call('POST', '/v2/templates/{templateID}/builds/{buildID}', options, (init) =>
      this.api.POST('/v2/templates/{templateID}/builds/{buildID}', { ...init, params: { path: { templateID, buildID } }, body }),
    );
  }

  /** `GET /templates/{templateID}/builds/{buildID}/status`: the status and the log entries from `logsOffset` on. */
  async getTemplateBuildStatus(
    templateID: string,
    buildID: string,
    query: TemplateBuildStatusQuery = {},
    options?: CallOptions,
  ): Promise<TemplateBuildInfo> {
    return this.#json('GET', '/templates/{templateID}/builds/{buildID}/status', options, (init) =>
      this.api.GET('/templates/{templateID}/builds/{buildID}/status', { ...init, params: { path: { templateID, buildID }, query } }),
    );
  }

  /** `GET /templates/{templateID}/builds/{buildID}/logs`. */
  async getTemplateBuildLogs(
    templateID: string,
    buildID: string,
    query: TemplateBuildLogsQuery = {},
    options?: CallOptions,
  ): Promise<TemplateBuildLogsResponse> {
    return this.#json('GET', '/templates/{templateID}/builds/{buildID}/logs', options, (init) =>
      this.api.GET('/templates/{templateID}/builds/{buildID}/logs', { ...init, params: { path: { templateID, buildID }, query } }),
    );
  }

  // --- API keys ------------------------------------------------------------

  /** `GET /api-keys`: the keys of the caller's team, values masked. */
  async listApiKeys(options?: CallOptions): Promise<TeamAPIKey[]> {
    return this.#json('GET', '/api-keys', options, (init) => this.api.GET('/api-keys', init));
  }

  /** `POST /api-keys`: a new key; its value is in the answer and nowhere else. Not retried: a repeat would make a second key. */
  async createApiKey(body: NewTeamAPIKey, options?: CallOptions): Promise<CreatedTeamAPIKey> {
    return this.#json('POST', '/api-keys', options, (init) => this.api.POST('/api-keys', { ...init, body }));
  }

  /** `PATCH /api-keys/{apiKeyID}`: a new name. Retried: it sets an absolute value. */
  async renameApiKey(apiKeyID: string, body: UpdateTeamAPIKey, options?: CallOptions): Promise<void> {
    await this.#call('PATCH', '/api-keys/{apiKeyID}', { ...options, idempotent: true }, (init) =>
      this.api.PATCH('/api-keys/{apiKeyID}', { ...init, params: { path: { apiKeyID } }, body }),
    );
  }

  /** `DELETE /api-keys/{apiKeyID}`. The server's last key is refused with kind `conflict`. */
  async deleteApiKey(apiKeyID: string, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/api-keys/{apiKeyID}', options, (init) =>
      this.api.DELETE('/api-keys/{apiKeyID}', { ...init, params: { path: { apiKeyID } } }),
    );
  }

  // --- teams (the admin credential only) -----------------------------------

  /** `GET /admin/teams`: every team, with its limits and usage. */
  async listTeams(options?: CallOptions): Promise<Team[]> {
    return this.#json('GET', '/admin/teams', options, (init) => this.api.GET('/admin/teams', init));
  }

  /** `POST /admin/teams`: a new team. Not retried: a repeat would be refused as a taken name. */
  async createTeam(body: NewTeam, options?: CallOptions): Promise<Team> {
    return this.#json('POST', '/admin/teams', options, (init) => this.api.POST('/admin/teams', { ...init, body }));
  }

  /** `GET /admin/teams/{teamID}`. */
  async getTeam(teamID: string, options?: CallOptions): Promise<Team> {
    return this.#json('GET', '/admin/teams/{teamID}', options, (init) => this.api.GET('/admin/teams/{teamID}', { ...init, params: { path: { teamID } } }));
  }

  /** `DELETE /admin/teams/{teamID}`: the team and its keys; refused with kind `conflict` while it has sandboxes or templates. */
  async deleteTeam(teamID: string, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/admin/teams/{teamID}', options, (init) => this.api.DELETE('/admin/teams/{teamID}', { ...init, params: { path: { teamID } } }));
  }

  /** `PATCH /admin/teams/{teamID}/limits`: sets the limits given (null lifts one). Retried: it sets absolute values. */
  async setTeamLimits(teamID: string, body: TeamLimits, options?: CallOptions): Promise<Team> {
    return this.#json('PATCH', '/admin/teams/{teamID}/limits', { ...options, idempotent: true }, (init) =>
      this.api.PATCH('/admin/teams/{teamID}/limits', { ...init, params: { path: { teamID } }, body }),
    );
  }

  /** `GET /admin/teams/{teamID}/api-keys`: the team's keys, values masked. */
  async listTeamApiKeys(teamID: string, options?: CallOptions): Promise<TeamAPIKey[]> {
    return this.#json('GET', '/admin/teams/{teamID}/api-keys', options, (init) => this.api.GET('/admin/teams/{teamID}/api-keys', { ...init, params: { path: { teamID } } }));
  }

  /** `POST /admin/teams/{teamID}/api-keys`: a new key of the team; its value is in the answer and nowhere else. Not retried. */
  async createTeamApiKey(teamID: string, body: NewTeamAPIKey, options?: CallOptions): Promise<CreatedTeamAPIKey> {
    return this.#json('POST', '/admin/teams/{teamID}/api-keys', options, (init) =>
      this.api.POST('/admin/teams/{teamID}/api-keys', { ...init, params: { path: { teamID } }, body }),
    );
  }

  /** `DELETE /admin/teams/{teamID}/api-keys/{apiKeyID}`. The server's last key is refused with kind `conflict`. */
  async deleteTeamApiKey(teamID: string, apiKeyID: string, options?: CallOptions): Promise<void> {
    await this.#call('DELETE', '/admin/teams/{teamID}/api-keys/{apiKeyID}', options, (init) =>
      this.api.DELETE('/admin/teams/{teamID}/api-keys/{apiKeyID}', { ...init, params: { path: { teamID, apiKeyID } } }),
    );
  }

  // --- server --------------------------------------------------------------

  /**
   * `GET /health`: true when the server answers 2xx, false when it answers
   * 502/503/504 (up but not serving). Not retried, so that "not ready" comes
   * back at once.
   */
  async health(options?: CallOptions): Promise<boolean> {
    try {
      await this.#call('GET', '/health', { ...options, noRetry: true }, (init) => this.api.GET('/health', init));
      return true;
    } catch (err) {
      if (err instanceof ControlApiError && err.kind === 'unavailable') return false;
      throw err;
    }
  }

  // --- plumbing ------------------------------------------------------------

  #transport(setup: CallSetup): FetchFunction {
    const policy = setup.noRetry ? { ...this.#policy, maxRetries: 0 } : this.#policy;
    return (request) =>
      sendWithRetries(request, {
        fetch: this.#fetch,
        policy,
        idempotent: setup.idempotent ?? false,
        timeoutMs: setup.requestTimeoutMs ?? this.#timeoutMs,
        signal: this.#signal,
      });
  }

  /**
   * Runs one typed call and turns every failure into a ControlApiError. The
   * request actually sent names the path in errors (parameters filled in);
   * `schemaPath` stands in when no request was made.
   */
  async #call<D>(
    method: string,
    schemaPath: string,
    setup: CallSetup | undefined,
    run: (init: CallInit) => Promise<Outcome<D>>,
  ): Promise<{ data: D | undefined; response: Response }> {
    let sent: Request | undefined;
    const transport = this.#transport(setup ?? {});
    const init: CallInit = {
      fetch: (request) => {
        sent = request;
        return transport(request);
      },
      signal: setup?.signal,
      headers: setup?.headers,
    };
    const path = (): string => (sent ? new URL(sent.url).pathname : schemaPath);
    let outcome: Outcome<D>;
    try {
      outcome = await run(init);
    } catch (err) {
      const callerAborted = Boolean(setup?.signal?.aborted || this.#signal?.aborted);
      throw errorFromFailure(method, path(), err, callerAborted);
    }
    const { response } = outcome;
    if (!response.ok) throw errorFromResponse(method, path(), response, outcome.error);
    return { data: outcome.data, response };
  }

  /** A call whose 2xx answer must carry a JSON body. */
  async #json<D>(
    method: string,
    schemaPath: string,
    setup: CallSetup | undefined,
    run: (init: CallInit) => Promise<Outcome<D>>,
  ): Promise<Exclude<D, undefined>> {
    const { data, response } = await this.#call(method, schemaPath, setup, run);
    return expectBody(data, method, response);
  }
}

function expectBody<D>(data: D, method: string, response: Response): Exclude<D, undefined> {
  if (data !== undefined) return data as Exclude<D, undefined>;
  const path = response.url ? new URL(response.url).pathname : '';
  throw new ControlApiError(`${method} ${path} answered ${response.status} without the expected JSON body`, {
    kind: 'invalid_response',
    method,
    path,
    status: response.status,
  });
}

/** An error answer's body as openapi-fetch would give it: JSON when it parses, else the text, else undefined. */
async function errorBody(response: Response): Promise<unknown> {
  const text = await response.text().catch(() => '');
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function nextToken(response: Response): string | undefined {
  return response.headers.get('x-next-token') || undefined;
}

function sandboxListQuery(query: ListSandboxesQuery): NonNullable<paths['/v2/sandboxes']['get']['parameters']['query']> {
  const { metadata, state, startedAfter, template, order, limit, nextToken } = query;
  return {
    metadata: metadata && Object.keys(metadata).length > 0 ? encodeMetadataFilter(metadata) : undefined,
    state: state && state.length > 0 ? state : undefined,
    startedAfter: startedAfter instanceof Date ? startedAfter.toISOString() : startedAfter,
    template: template || undefined,
    order,
    limit,
    nextToken,
  };
}
