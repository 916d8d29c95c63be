// A running command or terminal: its output as it arrives, its result, and
// the calls that act on it.
import type { RequestOpts } from './config.js';
import type { ProcessMessage } from './convert.js';
import { fromRpcError } from './error-mapping.js';
import { CommandExitError, SandboxError, type CommandResult } from './errors.js';
import type { OpenedStream } from './stream.js';
import { Utf8StreamDecoder } from './utf8-decoder.js';

/** Gets output as it arrives; a promise it returns is awaited before more is read, which slows the stream down. */
export type OutputCallback = (data: string) => unknown;
/** Gets a terminal's raw output; a promise it returns is awaited before more is read. */
export type PtyOutputCallback = (data: Uint8Array) => unknown;

/** What a handle does when asked to act on its process; bound to the pid by its creator. */
export interface ProcessActions {
  kill(opts?: RequestOpts): Promise<boolean>;
  sendStdin(data: string | Uint8Array, opts?: RequestOpts): Promise<void>;
  closeStdin(opts?: RequestOpts): Promise<void>;
}

export interface OutputCallbacks {
  onStdout?: OutputCallback | undefined;
  onStderr?: OutputCallback | undefined;
  onPty?: PtyOutputCallback | undefined;
}

/** A callback's failure, kept apart so that it reaches `wait()` as thrown. */
class CallbackFailure {
  constructor(readonly error: unknown) {}
}

/**
 * A command (or terminal) started in the background or attached to by pid.
 * Output is gathered into `stdout` / `stderr` and handed to the callbacks as
 * it arrives; `wait()` gives the result. The process keeps running when the
 * handle disconnects.
 */
export class CommandHandle {
  /** Process ID inside the sandbox. */
  readonly pid: number;
  readonly #stream: OpenedStream<ProcessMessage>;
  readonly #actions: ProcessActions;
  readonly #callbacks: OutputCallbacks;
  readonly #done: Promise<void>;
  #stdout = '';
  #stderr = '';
  #end: { exitCode: number; error: string | undefined } | undefined;
  #failure: unknown;
  #disconnected = false;

  constructor(pid: number, stream: OpenedStream<ProcessMessage>, actions: ProcessActions, callbacks: OutputCallbacks) {
    this.pid = pid;
    this.#stream = stream;
    this.#actions = actions;
    this.#callbacks = callbacks;
    this.#done = this.#consume();
  }

  /** Everything the command wrote to stdout so far. */
  get stdout(): string {
    return this.#stdout;
  }

  /** Everything the command wrote to stderr so far. */
  get stderr(): string {
    return this.#stderr;
  }

  /** Exit code, once the command has ended. */
  get exitCode(): number | undefined {
    return this.#end?.exitCode;
  }

  /** envd's description of a failed end (e.g. `signal: killed`), once the command has ended. */
  get error(): string | undefined {
    return this.#end?.error;
  }

  /**
   * Waits for the command to end. Throws `CommandExitError` when it exits
   * with a non-zero code, `TimeoutError` when its `timeoutMs` ran out.
   */
  async wait(): Promise<CommandResult> {
    await this.#done;
    if (this.#failure instanceof CallbackFailure) throw this.#failure.error;
    if (this.#failure !== undefined) throw this.#failure;
    if (!this.#end) {
      throw new SandboxError(
        this.#disconnected
          ? `disconnected from process ${this.pid} before it ended; attach again with connect(${this.pid})`
          : `the stream of process ${this.pid} ended without its exit status`,
      );
    }
    const result: CommandResult = { ...this.#end, stdout: this.#stdout, stderr: this.#stderr };
    if (result.exitCode !== 0) throw new CommandExitError(result);
    return result;
  }

  /**
   * Stops receiving output; the process keeps running and can be attached
   * to again by pid. No callback runs after this returns.
   */
  async disconnect(): Promise<void> {
    this.#disconnected = true;
    this.#stream.close();
  }

  /** Kills the process (SIGKILL). False when it no longer exists. */
  kill(opts?: RequestOpts): Promise<boolean> {
    return this.#actions.kill(opts);
  }

  /** Writes to the process's stdin (it must have been started with `stdin: true`), or types into a terminal. */
  sendStdin(data: string | Uint8Array, opts?: RequestOpts): Promise<void> {
    return this.#actions.sendStdin(data, opts);
  }

  /** Closes the process's stdin, so that it reads end-of-file; a terminal gets Ctrl-D instead. */
  closeStdin(opts?: RequestOpts): Promise<void> {
    return this.#actions.closeStdin(opts);
  }

  async #consume(): Promise<void> {
    const stdout = new Utf8StreamDecoder();
    const stderr = new Utf8StreamDecoder();
    const deliver = async <T>(callback: ((data: T) => unknown) | undefined, data: T): Promise<void> => {
      if (!callback || this.#disconnected) return;
      try {
        await callback(data);
      } catch (err) {
        throw new CallbackFailure(err);
      }
    };
    const flush = async () => {
      // A multi-byte character cut at the end shows as U+FFFD instead of vanishing.
      const out = stdout.flush();
      const err = stderr.flush();
      this.#stdout += out;
      this.#stderr += err;
      if (out) await deliver(this.#callbacks.onStdout, out);
      if (err) await deliver(this.#callbacks.onStderr, err);
    };
    try {
      for (;;) {
        const item = await this.#stream.rest.next();
        if (item.done) break;
        const message = item.value;
        switch (message.kind) {
          case 'stdout': {
            const text = stdout.decode(message.data);
            this.#stdout += text;
            if (text) await deliver(this.#callbacks.onStdout, text);
            break;
          }
          case 'stderr': {
            const text = stderr.decode(message.data);
            this.#stderr += text;
            if (text) await deliver(this.#callbacks.onStderr, text);
            break;
          }
          case 'pty':
            await deliver(this.#callbacks.onPty, message.data);
            break;
          case 'end':
            // Recorded before the last callbacks run, so a disconnect from inside one keeps the result.
            this.#end = { exitCode: message.exitCode, error: message.error };
            await flush();
            break;
          default:
            break;
        }
      }
      if (!this.#end) await flush();
    } catch (err) {
      if (err instanceof CallbackFailure) this.#failure = err;
      // After disconnect(), the stream fails because it was closed here: that is no failure of the command.
      else if (!this.#disconnected) this.#failure = fromRpcError(err, 'other');
    } finally {
      // Also after a failed callback: nobody reads the stream any more, so it must not stall envd.
      this.#stream.close();
    }
  }
}
