// Commands the server itself runs in a sandbox through its envd: a build's
// steps, and a template's start and ready commands.
import { ConnectError } from '@connectrpc/connect';
import { EnvdClient, withUser } from '@paddock/envd-client';
import type { EnvdEndpoint } from '@paddock/runtime';

/** A line a command wrote, as it came. */
export type OutputLine = { stream: 'stdout' | 'stderr'; line: string };

export interface CommandOptions {
  /** Run as this user; envd's default user (the template's) when unset. */
  user?: string;
  cwd?: string;
  env?: Record<string, string>;
  /** Lines of its output; a line longer than MAX_LINE is cut. */
  onOutput?: (out: OutputLine) => void;
  /** Killed when this long has passed, ms; unbounded when unset. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface CommandResult {
  exitCode: number;
  /** `exit status 1`, `signal: killed`, or why it could not run. */
  status: string;
}

const MAX_LINE = 4096;

/** Splits a stream of bytes into lines, keeping what follows the last newline for the next chunk. */
export class LineSplitter {
  private rest = '';
  private readonly decoder = new TextDecoder();

  constructor(private readonly emit: (line: string) => void) {}

  push(bytes: Uint8Array): void {
    const lines = (this.rest + this.decoder.decode(bytes, { stream: true })).split('\n');
    this.rest = lines.pop()!;
    if (this.rest.length > MAX_LINE) {
      this.emit(this.rest.slice(0, MAX_LINE));
      this.rest = '';
    }
    for (const line of lines) this.emit(line.length > MAX_LINE ? line.slice(0, MAX_LINE) : line);
  }

  end(): void {
    const last = this.rest + this.decoder.decode();
    if (last) this.emit(last);
    this.rest = '';
  }
}

/** A connection to one sandbox's envd. */
export class SandboxShell {
  readonly envd: EnvdClient;
  private shell: Promise<string[]> | undefined;

  constructor(endpoint: EnvdEndpoint, accessToken?: string) {
    this.envd =
      'socketPath' in endpoint
        ? new EnvdClient({ envdUrl: 'http://localhost', socketPath: endpoint.socketPath, accessToken })
        : new EnvdClient({ envdUrl: `http://${endpoint.host}:${endpoint.port}`, accessToken });
  }

  /** bash as a login shell where the image has it (as the SDKs run commands), else sh. */
  private async shellArgv(): Promise<string[]> {
    this.shell ??= this.envd.filesystem
      .stat({ path: '/bin/bash' }, withUser('root'))
      .then(() => ['/bin/bash', '-l', '-c'])
      .catch(() => ['/bin/sh', '-c']);
    return this.shell;
  }

  /** Runs a shell command line and waits for its end. */
  async sh(command: string, opts: CommandOptions = {}): Promise<CommandResult> {
    const [cmd, ...args] = await this.shellArgv();
    return this.exec([cmd!, ...args, command], opts);
  }

  /** Runs a program (no shell) and waits for its end. */
  async exec(argv: readonly string[], opts: CommandOptions = {}): Promise<CommandResult> {
    const split = {
      stdout: new LineSplitter((line) => opts.onOutput?.({ stream: 'stdout', line })),
      stderr: new LineSplitter((line) => opts.onOutput?.({ stream: 'stderr', line })),
    };
    let result: CommandResult | undefined;
    try {
      const events = this.envd.process.start(
        { process: { cmd: argv[0]!, args: argv.slice(1), envs: opts.env ?? {}, ...(opts.cwd ? { cwd: opts.cwd } : {}) }, stdin: false },
        { ...(opts.user ? withUser(opts.user) : {}), ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}), signal: opts.signal },
      );
      for await (const res of events) {
        const ev = res.event?.event;
        if (ev?.case === 'data') {
          const out = ev.value.output;
          if (out.case === 'stdout' || out.case === 'stderr') split[out.case].push(out.value);
        } else if (ev?.case === 'end') {
          result = { exitCode: ev.value.exitCode, status: ev.value.error || ev.value.status };
        }
      }
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      return { exitCode: -1, status: ConnectError.from(err).rawMessage };
    } finally {
      split.stdout.end();
      split.stderr.end();
    }
    return result ?? { exitCode: -1, status: 'the command ended without an exit status' };
  }

  /** Starts a shell command line that keeps running after this returns (a template's start command). */
  async startInBackground(command: string, opts: Pick<CommandOptions, 'user' | 'cwd' | 'env'> = {}): Promise<void> {
    const [cmd, ...args] = await this.shellArgv();
    const abort = new AbortController();
    try {
      const events = this.envd.process.start(
        { process: { cmd: cmd!, args: [...args, command], envs: opts.env ?? {}, ...(opts.cwd ? { cwd: opts.cwd } : {}) }, stdin: false, tag: 'start-cmd' },
        { ...(opts.user ? withUser(opts.user) : {}), signal: abort.signal },
      );
      // Once it has started, the stream is left: envd keeps the process running.
      for await (const res of events) if (res.event?.event.case === 'start') break;
    } finally {
      abort.abort();
    }
  }

  close(): Promise<void> {
    return this.envd.close();
  }
}

/** How often a ready command is run again until it succeeds. */
const READY_POLL_MS = 250;

/**
 * Starts a template's start command, then runs its ready command until it
 * succeeds; without a ready command, the start command is only started.
 * Rejects with the ready command's last output when `timeoutMs` passes.
 */
export async function startAndWaitReady(
  shell: SandboxShell,
  cmds: { startCmd: string | null; readyCmd: string | null },
  opts: { timeoutMs: number; env?: Record<string, string>; user?: string; cwd?: string; onOutput?: (out: OutputLine) => void },
): Promise<void> {
  if (cmds.startCmd) await shell.startInBackground(cmds.startCmd, opts);
  if (!cmds.readyCmd) return;
  const deadline = Date.now() + opts.timeoutMs;
  let last: CommandResult = { exitCode: -1, status: 'not run' };
  let output: OutputLine[] = [];
  for (let attempt = 0; Date.now() < deadline; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, READY_POLL_MS));
    output = [];
    last = await shell.sh(cmds.readyCmd, { ...opts, timeoutMs: Math.max(1, deadline - Date.now()), onOutput: (o) => output.push(o) });
    if (last.exitCode === 0) return;
  }
  for (const o of output.slice(-20)) opts.onOutput?.(o);
  throw new ReadyTimeout(`the ready command '${cmds.readyCmd}' did not succeed within ${Math.round(opts.timeoutMs / 1000)} s (last: ${last.status})`);
}

export class ReadyTimeout extends Error {
  override name = 'ReadyTimeout';
}
