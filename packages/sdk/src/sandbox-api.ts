// The control API calls behind `Sandbox`'s static and instance methods.
import { ControlApiError, ControlClient, Paginator, type CallOptions, type FetchFunction } from '@paddock/control-client';
import { describeFailure, errorKindOf } from '@paddock/protocol';
import type { Logger, RequestOpts, ResolvedConfig } from './config.js';
import {
  toConnectionInfo,
  toSnapshotInfo,
  toNetworkUpdate,
  toNewSandbox,
  toSandboxInfo,
  toSandboxMetrics,
  toSeconds,
  type NewSandboxInput,
} from './convert.js';
import { fromControlError, type ErrorSubject } from './error-mapping.js';
import { proxyFetch } from './proxy.js';
import { AuthenticationError, type SandboxError } from './errors.js';
import type {
  SandboxConnectionInfo,
  SandboxInfo,
  SandboxMetrics,
  SandboxNetworkUpdate,
  SandboxState,
  SnapshotInfo,
} from './types.js';

/** Filters and paging of `Sandbox.list`. */
export interface SandboxQuery {
  /** Only sandboxes whose metadata has all of these pairs. */
  metadata?: Record<string, string>;
  /** Only sandboxes in these states; both when omitted. */
  state?: SandboxState[];
  /** Only sandboxes started at or after this time. */
  startedAfter?: Date;
  /** Only sandboxes of this template (ID or name). */
  template?: string;
}

/** Filters, order and paging of `Sandbox.list`. */
export interface ListQuery {
  /** Which sandboxes to list; all of the team's when omitted. */
  query?: SandboxQuery;
  /** By start time; newest first (`desc`) when omitted. */
  order?: 'asc' | 'desc';
  /** Page size; the server's default (100) when omitted. */
  limit?: number;
  /** Cursor of the page to start from, saved from `paginator.nextToken`. */
  nextToken?: string;
}

/** Walks the listing page by page: `for await`, `hasNext` / `nextItems()`, or `pages()`. */
export type SandboxPaginator = Paginator<SandboxInfo>;

/** Walks the snapshots page by page, like `SandboxPaginator`. */
export type SnapshotPaginator = Paginator<SnapshotInfo>;

/** Filters and paging of `Sandbox.listSnapshots`. */
export interface SnapshotQuery {
  /** Only snapshots taken from this sandbox. */
  sandboxId?: string;
  /** Only snapshots of this name. */
  name?: string;
  /** Page size; the server's default (100) when omitted. */
  limit?: number;
  /** Cursor of the page to start from, saved from `paginator.nextToken`. */
  nextToken?: string;
}

/** fetch that tells the logger of each call and its outcome; never of its headers, which hold the API key. */
function loggingFetch(logger: Logger, send: FetchFunction): FetchFunction {
  return async (request, init) => {
    const { pathname } = new URL(request.url);
    logger.debug?.(`→ ${request.method} ${pathname}`);
    try {
      const response = await send(request, init);
      const line = `← ${request.method} ${pathname} ${response.status}`;
      if (response.ok) logger.info?.(line);
      else logger.error?.(line);
      return response;
    } catch (err) {
      logger.error?.(`✗ ${request.method} ${pathname}: ${describeFailure(err)}`);
      throw err;
    }
  };
}

/** A control client for one call, or the reason there cannot be one. */
export function controlClient(config: ResolvedConfig): ControlClient {
  if (!config.apiKey) {
    throw new AuthenticationError('an API key is required: pass `apiKey` or set PADDOCK_API_KEY');
  }
  let send: FetchFunction | undefined = config.proxy === undefined ? undefined : proxyFetch(config.proxy);
  if (config.logger) send = loggingFetch(config.logger, send ?? ((request, init) => fetch(request, init)));
  return new ControlClient({
    apiUrl: config.apiUrl,
    apiKey: config.apiKey,
    requestTimeoutMs: config.requestTimeoutMs,
    headers: config.apiHeaders,
    retries: { maxRetries: config.retries },
    ...(send ? { fetch: send } : {}),
  });
}

function callOptions(opts: RequestOpts): CallOptions {
  const options: CallOptions = {};
  if (opts.requestTimeoutMs !== undefined) options.requestTimeoutMs = opts.requestTimeoutMs;
  if (opts.signal) options.signal = opts.signal;
  return options;
}

async function call<T>(subject: ErrorSubject, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw fromControlError(err, subject);
  }
}

/** Whether the control API answered that the resource does not exist; E2B clients read the body's code. */
function isNotFound(err: unknown): boolean {
  return err instanceof ControlApiError && (err.code ?? err.status) === 404;
}

function isConflict(err: unknown): boolean {
  return err instanceof ControlApiError && (err.code ?? err.status) === 409;
}

export async function createSandbox(config: ResolvedConfig, input: NewSandboxInput, opts: RequestOpts): Promise<SandboxConnectionInfo> {
  const control = controlClient(config);
  // A missing template is a plain NotFoundError: no sandbox is involved yet.
  return call('other', async () => toConnectionInfo(await control.createSandbox(toNewSandbox(input), callOptions(opts))));
}

export async function connectSandbox(
  config: ResolvedConfig,
  sandboxId: string,
  timeoutMs: number,
  opts: RequestOpts,
): Promise<SandboxConnectionInfo> {
  const control = controlClient(config);
  return call('sandbox', async () => {
    const { sandbox } = await control.connectSandbox(sandboxId, { timeout: toSeconds(timeoutMs) }, callOptions(opts));
    return toConnectionInfo(sandbox);
  });
}

export async function killSandbox(config: ResolvedConfig, sandboxId: string, opts: RequestOpts): Promise<boolean> {
  const control = controlClient(config);
  try {
    await control.killSandbox(sandboxId, callOptions(opts));
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw fromControlError(err, 'sandbox');
  }
}

export async function getSandboxInfo(config: ResolvedConfig, sandboxId: string, opts: RequestOpts): Promise<SandboxInfo> {
  const control = controlClient(config);
  return call('sandbox', async () => toSandboxInfo(await control.getSandbox(sandboxId, callOptions(opts))));
}

export interface MetricsRange {
  start?: Date | undefined;
  end?: Date | undefined;
}

function unixSeconds(date: Date): number {
  return Math.round(date.getTime() / 1000);
}

export async function getSandboxMetrics(
  config: ResolvedConfig,
  sandboxId: string,
  range: MetricsRange,
  opts: RequestOpts,
): Promise<SandboxMetrics[]> {
  const control = controlClient(config);
  const query: { start?: number; end?: number } = {};
  if (range.start) query.start = unixSeconds(range.start);
  if (range.end) query.end = unixSeconds(range.end);
  return call('sandbox', async () => (await control.getSandboxMetrics(sandboxId, query, callOptions(opts))).map(toSandboxMetrics));
}

export async function setSandboxTimeout(
  config: ResolvedConfig,
  sandboxId: string,
  timeoutMs: number,
  opts: RequestOpts,
): Promise<void> {
  const control = controlClient(config);
  await call('sandbox', () => control.setTimeout(sandboxId, { timeout: toSeconds(timeoutMs) }, callOptions(opts)));
}

/** True when paused now; false when the sandbox was not running (already paused). */
export async function pauseSandbox(
  config: ResolvedConfig,
  sandboxId: string,
  keepMemory: boolean | undefined,
  opts: RequestOpts,
): Promise<boolean> {
  const control = controlClient(config);
  try {
    await control.pauseSandbox(sandboxId, keepMemory === undefined ? {} : { memory: keepMemory }, callOptions(opts));
    return true;
  } catch (err) {
    if (isConflict(err)) return false;
    throw fromControlError(err, 'sandbox');
  }
}

export async function updateSandboxNetwork(
  config: ResolvedConfig,
  sandboxId: string,
  update: SandboxNetworkUpdate,
  opts: RequestOpts,
): Promise<void> {
  const control = controlClient(config);
  await call('sandbox', () => control.updateNetwork(sandboxId, toNetworkUpdate(update), callOptions(opts)));
}

export function listSandboxes(config: ResolvedConfig, list: ListQuery): SandboxPaginator {
  const control = controlClient(config);
  const { query = {}, order, limit } = list;
  return new Paginator<SandboxInfo>(
    (nextToken) =>
      call('other', async () => {
        const page = await control.listSandboxes({
          metadata: query.metadata,
          state: query.state,
          startedAfter: query.startedAfter,
          template: query.template,
          order,
          limit,
          nextToken,
        });
        return { items: page.items.map(toSandboxInfo), nextToken: page.nextToken };
      }),
    list.nextToken,
  );
}

export async function createSnapshot(
  config: ResolvedConfig,
  sandboxId: string,
  name: string | undefined,
  opts: RequestOpts,
): Promise<SnapshotInfo> {
  const control = controlClient(config);
  return call('sandbox', async () =>
    toSnapshotInfo(await control.createSnapshot(sandboxId, name === undefined ? {} : { name }, callOptions(opts))),
  );
}

export function listSnapshots(config: ResolvedConfig, query: SnapshotQuery): SnapshotPaginator {
  const control = controlClient(config);
  return new Paginator<SnapshotInfo>(
    (nextToken) =>
      call('other', async () => {
        const page = await control.listSnapshots({ sandboxID: query.sandboxId, name: query.name, limit: query.limit, nextToken });
        return { items: page.items.map(toSnapshotInfo), nextToken: page.nextToken };
      }),
    query.nextToken,
  );
}

/** True when deleted, false when there was no such snapshot. */
export async function deleteSnapshot(config: ResolvedConfig, snapshotId: string, opts: RequestOpts): Promise<boolean> {
  const control = controlClient(config);
  try {
    await control.deleteTemplate(snapshotId, callOptions(opts));
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw fromControlError(err, 'other');
  }
}

/** One entry per requested fork: the new sandbox's connection details, or the error that stopped it. */
export async function forkSandbox(
  config: ResolvedConfig,
  sandboxId: string,
  fork: { timeoutMs: number; count: number | undefined },
  opts: RequestOpts,
): Promise<Array<SandboxConnectionInfo | SandboxError>> {
  const control = controlClient(config);
  const path = `/sandboxes/${sandboxId}/fork`;
  const body = { timeout: toSeconds(fork.timeoutMs), ...(fork.count === undefined ? {} : { count: fork.count }) };
  const results = await call('sandbox', () => control.forkSandbox(sandboxId, body, callOptions(opts)));
  return results.map((result) => {
    if (result.sandbox) return toConnectionInfo(result.sandbox);
    const status = result.error?.code ?? 500;
    const message = result.error?.message ?? 'the server gave neither a sandbox nor an error for this fork';
    // Each fork's error is an answer of its own: the same classes as a whole call with that status.
    const failed = new ControlApiError(`POST ${path} failed for one fork with ${status}: ${message}`, {
      kind: errorKindOf(status),
      method: 'POST',
      path,
      status,
      code: status,
      serverMessage: message,
    });
    return fromControlError(failed, 'other');
  });
}
