// What the sandbox's modules (files, commands, pty) share: the envd client
// and the settings its calls are made with.
import type { CallOptions } from '@connectrpc/connect';
import { withUser, type EnvdClient } from '@paddock/envd-client';
import type { RequestOpts } from './config.js';

export interface SandboxContext {
  readonly envd: EnvdClient;
  readonly envdVersion: string;
  /** Default deadline of a call; 0 for none. */
  readonly requestTimeoutMs: number;
}

/** Options of one unary RPC: its deadline (sent as `Connect-Timeout-Ms`), signal and user. */
export function rpcOptions(context: SandboxContext, opts: RequestOpts & { user?: string | undefined } = {}): CallOptions {
  const timeoutMs = opts.requestTimeoutMs ?? context.requestTimeoutMs;
  const options: CallOptions = {};
  if (timeoutMs > 0) options.timeoutMs = timeoutMs;
  if (opts.signal) options.signal = opts.signal;
  return opts.user === undefined ? options : withUser(opts.user, options);
}

/** Options of one HTTP call to envd. */
export function httpOptions(context: SandboxContext, opts: RequestOpts = {}): { requestTimeoutMs: number; signal?: AbortSignal } {
  const options: { requestTimeoutMs: number; signal?: AbortSignal } = {
    requestTimeoutMs: opts.requestTimeoutMs ?? context.requestTimeoutMs,
  };
  if (opts.signal) options.signal = opts.signal;
  return options;
}
