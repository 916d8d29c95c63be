// `sandbox.commands`: shell commands run with `/bin/bash -l -c`.
import type { RequestOpts } from './config.js';
import { rpcOptions, type SandboxContext } from './context.js';
import { pidSelector, toProcessInfo } from './convert.js';
import { CommandHandle, type OutputCallback } from './command-handle.js';
import { ENVD_FEATURES, requireEnvd } from './envd-version.js';
import { fromRpcError } from './error-mapping.js';
import type { CommandResult } from './errors.js';
import { connectProcess, killProcess, sendProcessInput, startProcess, type AttachedProcess } from './process-rpc.js';
import type { ProcessInfo } from './types.js';

/** Options of the `commands` methods that only send one request: a deadline and a signal. */
export type CommandRequestOpts = RequestOpts;

/** Options of `commands.run`. */
export interface CommandStartOpts extends RequestOpts {
  /** Return a `CommandHandle` as soon as the command started, instead of its result once it ended. */
  background?: boolean;
  /** Working directory; the user's home when omitted. */
  cwd?: string;
  /** User to run as; envd's default user (`user`) when omitted. */
  user?: string;
  /** Environment variables of this command only, on top of the sandbox's. */
  envs?: Record<string, string>;
  /** Gets the command's stdout as it arrives. */
  onStdout?: OutputCallback;
  /** Gets the command's stderr as it arrives. */
  onStderr?: OutputCallback;
  /** Keep stdin open for `sendStdin`; without it the command reads end-of-file at once. */
  stdin?: boolean;
  /**
   * Longest the command may run, in ms; envd kills it then and `wait()`
   * throws `TimeoutError`. Default 60 000; 0 for no limit.
   */
  timeoutMs?: number;
}

/** Options of `commands.connect`. */
export interface CommandConnectOpts extends RequestOpts {
  /** Gets the command's stdout from now on, as it arrives. */
  onStdout?: OutputCallback;
  /** Gets the command's stderr from now on, as it arrives. */
  onStderr?: OutputCallback;
  /** Longest to stay attached, in ms. Default 60 000; 0 for no limit. */
  timeoutMs?: number;
}

/** Runs commands in the sandbox and manages the running ones. */
export class Commands {
  readonly #context: SandboxContext;

  constructor(context: SandboxContext) {
    this.#context = context;
  }

  /** The processes running in the sandbox: commands and terminals. */
  async list(opts?: CommandRequestOpts): Promise<ProcessInfo[]> {
    try {
      const { processes } = await this.#context.envd.process.list({}, rpcOptions(this.#context, opts));
      return processes.map(toProcessInfo);
    } catch (err) {
      throw fromRpcError(err, 'other');
    }
  }

  /** Writes to the stdin of a command started with `stdin: true`. */
  sendStdin(pid: number, data: string | Uint8Array, opts?: CommandRequestOpts): Promise<void> {
    return sendProcessInput(this.#context, pid, 'stdin', data, opts);
  }

  /** Closes a command's stdin, so that it reads end-of-file. */
  async closeStdin(pid: number, opts?: CommandRequestOpts): Promise<void> {
    requireEnvd(this.#context.envdVersion, ENVD_FEATURES.closeStdin, 'closeStdin');
    try {
      await this.#context.envd.process.closeStdin({ process: pidSelector(pid) }, rpcOptions(this.#context, opts));
    } catch (err) {
      throw fromRpcError(err, 'other');
    }
  }

  /** Kills a process (SIGKILL). False when there is no such process. */
  kill(pid: number, opts?: CommandRequestOpts): Promise<boolean> {
    return killProcess(this.#context, pid, opts);
  }

  /** Attaches to a running command: its output from now on, and its result. */
  async connect(pid: number, opts: CommandConnectOpts = {}): Promise<CommandHandle> {
    return this.#handle(await connectProcess(this.#context, pid, opts), opts);
  }

  /** Runs `cmd` and waits for it to end; throws `CommandExitError` on a non-zero exit code. */
  run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<CommandResult>;
  /** Starts `cmd` and returns its handle at once. */
  run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandHandle | CommandResult>;
  async run(cmd: string, opts: CommandStartOpts = {}): Promise<CommandHandle | CommandResult> {
    const started = await startProcess(
      this.#context,
      { cmd: '/bin/bash', args: ['-l', '-c', cmd], envs: opts.envs, cwd: opts.cwd, stdin: opts.stdin ?? false },
      opts,
    );
    const handle = this.#handle(started, opts);
    return opts.background ? handle : handle.wait();
  }

  #handle({ pid, stream }: AttachedProcess, callbacks: { onStdout?: OutputCallback; onStderr?: OutputCallback }): CommandHandle {
    return new CommandHandle(
      pid,
      stream,
      {
        kill: (o) => this.kill(pid, o),
        sendStdin: (data, o) => this.sendStdin(pid, data, o),
        closeStdin: (o) => this.closeStdin(pid, o),
      },
      { onStdout: callbacks.onStdout, onStderr: callbacks.onStderr },
    );
  }
}
