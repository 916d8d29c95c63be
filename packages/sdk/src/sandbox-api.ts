// The control API calls behind `Sandbox`'s static and instance methods.
import { ControlApiError, ControlClient, Paginator, type CallOptions } from '@paddock/control-client';
import type { RequestOpts, ResolvedConfig } from './config.js';
import {
  toConnectionInfo,
  toNetworkUpdate,
  toNewSandbox,
  toSandboxInfo,
  toSandboxMetrics,
  toSeconds,
  type NewSandboxInput,
} from './convert.js';
import { fromControlError, type ErrorSubject } from './error-mapping.js';
import { AuthenticationError } from './errors.js';
import type { SandboxConnectionInfo, SandboxInfo, SandboxMetrics, SandboxNetworkUpdate, SandboxState } from './types.js';

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

export interface ListQuery {
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

/** A control client for one call, or the reason there cannot be one. */
export function controlClient(config: ResolvedConfig): ControlClient {
  if (!config.apiKey) {
    throw new AuthenticationError('an API key is required: pass `apiKey` or set PADDOCK_API_KEY');
  }
  return new ControlClient({
    apiUrl: config.apiUrl,
    apiKey: config.apiKey,
    requestTimeoutMs: config.requestTimeoutMs,
    headers: config.headers,
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
