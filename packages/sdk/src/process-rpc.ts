// The calls of envd's process service that commands and terminals share.
import { Code, ConnectError } from '@connectrpc/connect';
import { withUser } from '@paddock/envd-client';
import type { RequestOpts } from './config.js';
import { rpcOptions, type SandboxContext } from './context.js';
import {
  SIGKILL,
  pidSelector,
  toProcessInput,
  toProcessMessage,
  toStartRequest,
  type ProcessMessage,
  type ProcessStartInput,
} from './convert.js';
import { fromRpcError } from './error-mapping.js';
import { SandboxError } from './errors.js';
import { openStream, type OpenedStream } from './stream.js';

/** Default lifetime of a command's or terminal's stream, as in E2B's SDK. */
export const DEFAULT_PROCESS_TIMEOUT_MS = 60_000;

export interface StreamOpts extends RequestOpts {
  /** Lifetime of the stream in ms; envd kills a started process when it runs out. 0 for none. */
  timeoutMs?: number | undefined;
  user?: string | undefined;
}

export interface AttachedProcess {
  pid: number;
  stream: OpenedStream<ProcessMessage>;
}

function pidOf(stream: OpenedStream<ProcessMessage>): number {
  if (stream.first.kind !== 'start') {
    stream.close();
    throw new SandboxError(`envd answered with a '${stream.first.kind}' message where the process's start was expected`);
  }
  return stream.first.pid;
}

/** `Start`: runs a process and returns once envd reports its pid. */
export async function startProcess(context: SandboxContext, input: ProcessStartInput, opts: StreamOpts): Promise<AttachedProcess> {
  const stream = await openStream((options) => context.envd.process.start(toStartRequest(input), options), toProcessMessage, {
    requestTimeoutMs: opts.requestTimeoutMs ?? context.requestTimeoutMs,
    timeoutMs: opts.timeoutMs ?? DEFAULT_PROCESS_TIMEOUT_MS,
    signal: opts.signal,
    callOptions: opts.user === undefined ? undefined : withUser(opts.user),
    subject: 'other',
  });
  return { pid: pidOf(stream), stream };
}

/** `Connect`: attaches to a running process's output. */
export async function connectProcess(context: SandboxContext, pid: number, opts: StreamOpts): Promise<AttachedProcess> {
  const stream = await openStream(
    (options) => context.envd.process.connect({ process: pidSelector(pid) }, options),
    toProcessMessage,
    {
      requestTimeoutMs: opts.requestTimeoutMs ?? context.requestTimeoutMs,
      timeoutMs: opts.timeoutMs ?? DEFAULT_PROCESS_TIMEOUT_MS,
      signal: opts.signal,
      subject: 'other',
    },
  );
  return { pid: pidOf(stream), stream };
}

/** SIGKILL; false when there is no such process. */
export async function killProcess(context: SandboxContext, pid: number, opts: RequestOpts = {}): Promise<boolean> {
  try {
    await context.envd.process.sendSignal({ process: pidSelector(pid), signal: SIGKILL }, rpcOptions(context, opts));
    return true;
  } catch (err) {
    if (ConnectError.from(err).code === Code.NotFound) return false;
    throw fromRpcError(err, 'other');
  }
}

const encoder = new TextEncoder();

/** Sends bytes to a process's stdin, or to its terminal. */
export async function sendProcessInput(
  context: SandboxContext,
  pid: number,
  kind: 'stdin' | 'pty',
  data: string | Uint8Array,
  opts: RequestOpts = {},
): Promise<void> {
  const bytes = typeof data === 'string' ? encoder.encode(data) : data;
  try {
    await context.envd.process.sendInput({ process: pidSelector(pid), input: toProcessInput(kind, bytes) }, rpcOptions(context, opts));
  } catch (err) {
    throw fromRpcError(err, 'other');
  }
}
