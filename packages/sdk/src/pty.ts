// `sandbox.pty`: interactive terminals running `/bin/bash -i -l`.
import type { RequestOpts } from './config.js';
import { rpcOptions, type SandboxContext } from './context.js';
import { toResizeRequest } from './convert.js';
import { CommandHandle, type PtyOutputCallback } from './command-handle.js';
import { fromRpcError } from './error-mapping.js';
import { connectProcess, killProcess, sendProcessInput, startProcess, type AttachedProcess } from './process-rpc.js';
import type { PtySize } from './types.js';

/** Options of `pty.create`; `cols` and `rows` give the terminal's size. */
export interface PtyCreateOpts extends RequestOpts, PtySize {
  /** What the terminal prints, as raw bytes (escape sequences included). */
  onData: PtyOutputCallback;
  /** Longest the terminal may live, in ms; envd kills it then. Default 60 000; 0 for no limit. */
  timeoutMs?: number;
  /** User to log in as; envd's default user when omitted. */
  user?: string;
  /** Environment of the shell; wins over the terminal defaults (TERM, LANG, LC_ALL). */
  envs?: Record<string, string>;
  /** Working directory of the shell; the user's home when omitted. */
  cwd?: string;
}

/** Options of `pty.connect`. */
export interface PtyConnectOpts extends RequestOpts {
  /** What the terminal prints from now on, as raw bytes. */
  onData?: PtyOutputCallback;
  /** Longest to stay attached, in ms. Default 60 000; 0 for no limit. */
  timeoutMs?: number;
}

/** End-of-transmission (Ctrl-D): how a terminal is told that input has ended. */
const EOT = new Uint8Array([4]);

/** Starts and drives terminals in the sandbox. */
export class Pty {
  readonly #context: SandboxContext;

  constructor(context: SandboxContext) {
    this.#context = context;
  }

  /** Starts a login shell in a new terminal of `cols` × `rows`. */
  async create(opts: PtyCreateOpts): Promise<CommandHandle> {
    const envs = { TERM: 'xterm-256color', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', ...opts.envs };
    // No `stdin` field: envd gives a terminal its input by default.
    const started = await startProcess(
      this.#context,
      { cmd: '/bin/bash', args: ['-i', '-l'], envs, cwd: opts.cwd, pty: { cols: opts.cols, rows: opts.rows } },
      opts,
    );
    return this.#handle(started, opts.onData);
  }

  /** Attaches to a running terminal: its output from now on. */
  async connect(pid: number, opts: PtyConnectOpts = {}): Promise<CommandHandle> {
    return this.#handle(await connectProcess(this.#context, pid, opts), opts.onData);
  }

  /** Types into a terminal. */
  sendInput(pid: number, data: Uint8Array | string, opts?: RequestOpts): Promise<void> {
    return sendProcessInput(this.#context, pid, 'pty', data, opts);
  }

  /** Changes a terminal's size; the programs in it get SIGWINCH. */
  async resize(pid: number, size: PtySize, opts?: RequestOpts): Promise<void> {
    try {
      await this.#context.envd.process.update(toResizeRequest(pid, size), rpcOptions(this.#context, opts));
    } catch (err) {
      throw fromRpcError(err, 'other');
    }
  }

  /** Kills a terminal's shell (SIGKILL). False when there is no such process. */
  kill(pid: number, opts?: RequestOpts): Promise<boolean> {
    return killProcess(this.#context, pid, opts);
  }

  #handle({ pid, stream }: AttachedProcess, onData: PtyOutputCallback | undefined): CommandHandle {
    return new CommandHandle(
      pid,
      stream,
      {
        kill: (o) => this.kill(pid, o),
        sendStdin: (data, o) => this.sendInput(pid, data, o),
        closeStdin: (o) => this.sendInput(pid, EOT, o),
      },
      { onPty: onData },
    );
  }
}
