// The build API behind `Template.build` and its statics: reserve a build,
// upload the files of COPY steps the server does not have yet, start the
// build and follow its status and logs.
import { ControlApiError, type ControlClient } from '@paddock/control-client';
import type { RequestOpts } from './config.js';
import { fromControlError } from './error-mapping.js';
import { BuildError, type SandboxError } from './errors.js';
import type { LogEntry, TemplateBuildStatusResponse } from './build-log.js';
import { toBuildStatus } from './convert.js';

/** A build that was started. */
export interface BuildInfo {
  /** The name the build was asked for (E2B's former field name). */
  alias: string;
  /** The name the build was asked for. */
  name: string;
  /** Tags that point at the build once it succeeds. */
  tags: string[];
  /** ID of the template. */
  templateId: string;
  /** ID of the build. */
  buildId: string;
}

/** What `Template.assignTags` did. */
export interface TemplateTagInfo {
  /** The build the tags now point at. */
  buildId: string;
  /** The tags assigned. */
  tags: string[];
}

/** A tag of a template, as `Template.getTags` lists it. */
export interface TemplateTag {
  /** Name of the tag. */
  tag: string;
  /** The build the tag points at. */
  buildId: string;
  /** When the tag was made or last moved. */
  createdAt: Date;
}

/**
 * A failure of a build API call. A 400 is the build definition refused (an
 * unknown step, a registry type the server does not take): a BuildError, as
 * E2B's SDK throws; anything else is the SDK's usual class for the answer.
 */
export function fromBuildCallError(err: unknown): SandboxError {
  if (err instanceof ControlApiError && (err.code ?? err.status) === 400) {
    return new BuildError(err.serverMessage ?? err.message, { cause: err, statusCode: err.status });
  }
  return fromControlError(err, 'other');
}

export async function buildCall<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw fromBuildCallError(err);
  }
}

export async function buildStatus(
  control: ControlClient,
  templateId: string,
  buildId: string,
  logsOffset: number,
  opts: RequestOpts,
): Promise<TemplateBuildStatusResponse> {
  const info = await buildCall(() =>
    control.getTemplateBuildStatus(templateId, buildId, { logsOffset }, { signal: opts.signal, requestTimeoutMs: opts.requestTimeoutMs }),
  );
  return toBuildStatus(info);
}

/** How often a followed build's status is asked for. */
const POLL_INTERVAL_MS = 200;

/**
 * Follows a build to its end, handing each new log entry to `onLog`; throws
 * BuildError with the server's reason when it fails.
 */
export async function waitForBuild(
  control: ControlClient,
  templateId: string,
  buildId: string,
  onLog: ((entry: LogEntry) => void) | undefined,
  opts: RequestOpts,
): Promise<void> {
  let offset = 0;
  for (;;) {
    opts.signal?.throwIfAborted();
    const status = await buildStatus(control, templateId, buildId, offset, opts);
    offset += status.logEntries.length;
    for (const entry of status.logEntries) onLog?.(entry);
    if (status.status === 'ready') return;
    if (status.status === 'error') {
      const step = status.reason?.step === undefined ? '' : ` (step ${status.reason.step})`;
      throw new BuildError(status.reason?.message ?? `build ${buildId} failed${step} without a reason`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
}
