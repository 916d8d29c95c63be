// Processes started by envd, with pipes or a pseudo-terminal. A process
// outlives the stream that started it: clients attach and detach, each with
// its own queue. While a client reads slowly the process's output is paused
// (as a local pipe would block the writer); output that no client reads is
// dropped, so memory stays bounded.
import { Code, ConnectError } from '@connectrpc/connect';
import { accessSync, constants as fsConstants, statSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type * as pty from 'node-pty';
import { create as createMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { ProcessEvent_EndEventSchema, ProcessEventSchema, type ProcessEvent } from '@paddock/models';
import { EventQueue, type Joiner } from './event-queue.js';
import { PipedChild } from './piped-child.js';
import type { User } from './users.js';

export interface ProcessSpec {
  cmd: string;
  args: string[];
  /** Variables for this process only, on top of the base environment. */
  envs: Record<string, string>;
  cwd: string;
  user: User;
  /** Sandbox-wide variables, under `envs`. */
  baseEnv: Record<string, string>;
  /** The image's environment, under the user's HOME, USER and LOGNAME and `baseEnv`. */
  imageEnv: Readonly<Record<string, string>>;
  tag?: string;
  stdin: boolean;
  pty?: { cols: number; rows: number };
}

export interface ProcessConfigView {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

/** PATH for an image that sets none. */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const canRun = (path: string): boolean => {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * The program to start for `cmd`. E2B's clients run every command as
 * `/bin/bash -l -c CMD` and every terminal as `/bin/bash -i -l`; an image
 * without bash (Alpine, a busybox or distroless one) runs them with its
 * POSIX shell, which takes `-l`, `-c` and `-i` alike (dash, busybox ash) and
 * reads the same /etc/profile as a login shell. An image with no shell at
 * all cannot run them; anything else is started as asked.
 */
function programFor(cmd: string): string {
  if (cmd !== '/bin/bash' || canRun('/bin/bash')) return cmd;
  if (canRun('/bin/sh')) return '/bin/sh';
  throw new ConnectError("cannot start '/bin/bash': this sandbox's image has neither /bin/bash nor /bin/sh", Code.InvalidArgument);
}

/** After a piped process exits, its pipes (kept open by children it left behind) are read until quiet this long. */
const PIPE_LINGER_MS = 200;

// Go-style names, as E2B's envd reports them in EndEvent.status.
const SIGNAL_WORDS: Record<string, string> = {
  SIGHUP: 'hangup',
  SIGINT: 'interrupt',
  SIGQUIT: 'quit',
  SIGILL: 'illegal instruction',
  SIGTRAP: 'trace/breakpoint trap',
  SIGABRT: 'aborted',
  SIGBUS: 'bus error',
  SIGFPE: 'floating point exception',
  SIGKILL: 'killed',
  SIGUSR1: 'user defined signal 1',
  SIGSEGV: 'segmentation fault',
  SIGUSR2: 'user defined signal 2',
  SIGPIPE: 'broken pipe',
  SIGALRM: 'alarm clock',
  SIGTERM: 'terminated',
};

function signalName(signo: number): string {
  const entry = Object.entries(osConstants.signals).find(([, n]) => n === signo);
  return entry ? entry[0] : `signal ${signo}`;
}

function endEvent(code: number | null, signal: string | null, error?: string): ProcessEvent {
  const value: MessageInitShape<typeof ProcessEvent_EndEventSchema> =
    code !== null
      ? { exitCode: code, exited: true, status: `exit status ${code}` }
      : { exitCode: -1, exited: false, status: `signal: ${SIGNAL_WORDS[signal ?? ''] ?? signal ?? 'unknown'}` };
  // As E2B's envd: a process that did not exit 0 has its wait error, which the SDKs make the message of CommandExitError.
  if (error !== undefined) value.error = error;
  else if (code !== 0) value.error = value.status;
  return createMessage(ProcessEventSchema, { event: { case: 'end', value: createMessage(ProcessEvent_EndEventSchema, value) } });
}

let ptyModule: typeof pty | undefined;
/**
 * node-pty, loaded with the first terminal: loading it took ~7 ms of every
 * envd start, before the first command of a new sandbox could run, and most
 * sandboxes never open a terminal. Its JavaScript is in the bundle, which
 * runs it on this first require; its addon (pty.node) is found beside the
 * bundle (build.mjs puts it there).
 */
function nodePty(): typeof pty {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ptyModule ??= require('node-pty') as typeof pty;
  return ptyModule;
}

function dataEvent(stream: 'stdout' | 'stderr' | 'pty', bytes: Uint8Array): ProcessEvent {
  return createMessage(ProcessEventSchema, { event: { case: 'data', value: { output: { case: stream, value: bytes } } } });
}

type Output = { stream: 'stdout' | 'stderr' | 'pty'; bytes: Uint8Array };

function outputOf(ev: ProcessEvent): Output | undefined {
  if (ev.event.case !== 'data') return undefined;
  const { output } = ev.event.value;
  return output.case === undefined ? undefined : { stream: output.case, bytes: output.value };
}

/**
 * The output of a run of events the joiner below took together: its stream
 * and its chunks in order; undefined when the run is not output. The joiner
 * puts only output of one stream into a run.
 */
function outputRun(run: readonly ProcessEvent[]): { stream: Output['stream']; chunks: Uint8Array[] } | undefined {
  const first = run[0] && outputOf(run[0]);
  if (!first) return undefined;
  const chunks = run.map((ev) => {
    const out = outputOf(ev);
    if (out?.stream !== first.stream) throw new Error(`a run of ${first.stream} output holds another event`);
    return out.bytes;
  });
  return { stream: first.stream, chunks };
}

/** Output of one stream that a client has not read yet goes out as one message. */
const joinOutput: Joiner<ProcessEvent> = {
  joinable: (first, next) => {
    const a = outputOf(first);
    return a !== undefined && a.stream === outputOf(next)?.stream;
  },
  join: (events) => {
    const { stream, chunks } = outputRun(events)!;
    return dataEvent(stream, Buffer.concat(chunks));
  },
};

export class ManagedProcess {
  readonly pid: number;
  private readonly queues = new Set<EventQueue<ProcessEvent>>();
  private readonly sources: Array<{ pause(): void; resume(): void }> = [];
  private paused = false;
  private ended = false;
  private readonly child: PipedChild | undefined;
  private readonly term: pty.IPty | undefined;
  private stdinOpen: boolean;
  private markEnded!: () => void;
  /** Settles when the process has ended and its last event was sent. */
  readonly ended$: Promise<void> = new Promise((resolve) => (this.markEnded = resolve));

  private constructor(
    readonly config: ProcessConfigView,
    readonly tag: string | undefined,
    handle: { child: PipedChild } | { term: pty.IPty },
    stdin: boolean,
    private readonly onEnd: (p: ManagedProcess) => void,
  ) {
    if ('child' in handle) {
      this.child = handle.child;
      this.pid = handle.child.pid;
    } else {
      this.term = handle.term;
      this.pid = handle.term.pid;
    }
    this.stdinOpen = stdin;
  }

  get isPty(): boolean {
    return this.term !== undefined;
  }

  /** Starts a process; resolves once it runs, rejects with a ConnectError when it cannot start. */
  static async start(spec: ProcessSpec, onEnd: (p: ManagedProcess) => void): Promise<ManagedProcess> {
    const env: Record<string, string> = {
      PATH: DEFAULT_PATH,
      ...spec.imageEnv,
      HOME: spec.user.home,
      USER: spec.user.name,
      LOGNAME: spec.user.name,
      ...spec.baseEnv,
      ...spec.envs,
    };
    try {
      if (!statSync(spec.cwd).isDirectory()) {
        throw new ConnectError(`cwd '${spec.cwd}' is not a directory`, Code.InvalidArgument);
      }
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      throw new ConnectError(`cwd '${spec.cwd}' does not exist`, Code.InvalidArgument);
    }
    const config: ProcessConfigView = { cmd: spec.cmd, args: spec.args, envs: spec.envs, cwd: spec.cwd };
    const program = programFor(spec.cmd);
    if (spec.pty) return ManagedProcess.startPty(spec, program, env, config, onEnd);

    let child: PipedChild;
    try {
      // In a session of its own, so that a signal reaches everything it started.
      child = PipedChild.spawn({
        cmd: program,
        args: spec.args,
        env,
        cwd: spec.cwd,
        uid: spec.user.uid,
        gid: spec.user.gid,
        stdin: spec.stdin,
        oomScoreAdj: CHILD_OOM_SCORE_ADJ,
      });
    } catch (err) {
      throw new ConnectError(`cannot start '${spec.cmd}': ${(err as Error).message}`, Code.InvalidArgument, undefined, undefined, err);
    }
    const proc = new ManagedProcess(config, spec.tag, { child }, spec.stdin, onEnd);
    proc.wirePipes(child);
    return proc;
  }

  private static startPty(
    spec: ProcessSpec,
    program: string,
    env: Record<string, string>,
    config: ProcessConfigView,
    onEnd: (p: ManagedProcess) => void,
  ): ManagedProcess {
    // node-pty switches uid/gid but keeps the supplementary groups of envd
    // (root's); the child gets exactly the user's primary group instead, as
    // piped processes do.
    const saved = process.getgroups?.() ?? [];
    let term: pty.IPty;
    try {
      process.setgroups?.([spec.user.gid]);
      term = nodePty().spawn(program, spec.args, {
        name: env.TERM ?? 'xterm-256color',
        cols: spec.pty!.cols || 80,
        rows: spec.pty!.rows || 24,
        cwd: spec.cwd,
        env,
        uid: spec.user.uid,
        gid: spec.user.gid,
        encoding: null,
      });
    } catch (err) {
      throw new ConnectError(`cannot start '${spec.cmd}': ${(err as Error).message}`, Code.InvalidArgument, undefined, undefined, err);
    } finally {
      process.setgroups?.(saved);
    }
    preferForOomKill(term.pid);
    const proc = new ManagedProcess(config, spec.tag, { term }, true, onEnd);
    proc.wirePty(term);
    return proc;
  }

  private wirePipes(child: PipedChild): void {
    const out = child.stdout;
    const err = child.stderr;
    this.sources.push(out, err);
    /** When output last came (performance.now()); after the exit, quiet pipes are given up. */
    let lastOutput = 0;
    out.on('data', (b: Buffer) => {
      lastOutput = performance.now();
      this.broadcast(dataEvent('stdout', b), b.length);
    });
    err.on('data', (b: Buffer) => {
      lastOutput = performance.now();
      this.broadcast(dataEvent('stderr', b), b.length);
    });
    child.stdin?.on('error', () => undefined); // EPIPE when the process stops reading
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let linger: NodeJS.Timeout | undefined;
    const finish = () => {
      if (linger) clearTimeout(linger);
      if (exit) this.finish(endEvent(exit.code, exit.signal));
    };
    // Background children may hold the pipes open after the exit. Once the
    // pipes have been quiet for PIPE_LINGER_MS they are given up; output that
    // keeps coming, or that waits while a client reads slowly, is all read.
    const giveUpWhenQuiet = (): void => {
      const quiet = performance.now() - lastOutput;
      if (this.paused || quiet < PIPE_LINGER_MS) {
        linger = setTimeout(giveUpWhenQuiet, this.paused ? PIPE_LINGER_MS : PIPE_LINGER_MS - quiet);
        return;
      }
      // Timers run before the event loop polls: after a stall of envd (a busy
      // machine), output can be waiting unread even so. Look again once the
      // loop has polled; destroying the pipes would drop what is in them.
      const seen = lastOutput;
      linger = undefined;
      setImmediate(() => {
        if (out.closed && err.closed) return;
        if (lastOutput !== seen || this.paused) {
          linger = setTimeout(giveUpWhenQuiet, PIPE_LINGER_MS);
          return;
        }
        // Destroying the pipes makes the child emit 'close'.
        out.destroy();
        err.destroy();
      });
    };
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // Most commands have closed their pipes by the time their exit is seen: nothing to wait for then.
      if (out.closed && err.closed) return;
      // The quiet time counts from the exit at the earliest.
      lastOutput = performance.now();
      linger = setTimeout(giveUpWhenQuiet, PIPE_LINGER_MS);
    });
    child.once('close', finish);
  }

  private wirePty(term: pty.IPty): void {
    this.sources.push(term);
    term.onData((d) => {
      const bytes = typeof d === 'string' ? Buffer.from(d) : (d as Buffer);
      this.broadcast(dataEvent('pty', bytes), bytes.length);
    });
    term.onExit(({ exitCode, signal }) => {
      this.finish(signal ? endEvent(null, signalName(signal)) : endEvent(exitCode, null));
    });
  }

  /** A new client: gets `start{pid}` first, then every event from now on. */
  attach(): EventQueue<ProcessEvent> {
    const q = new EventQueue<ProcessEvent>(joinOutput);
    q.push(createMessage(ProcessEventSchema, { event: { case: 'start', value: { pid: this.pid } } }));
    if (this.ended) {
      q.close();
      return q;
    }
    this.queues.add(q);
    q.onDrain = () => this.updateFlow();
    q.onClose = () => {
      this.queues.delete(q);
      this.updateFlow();
    };
    return q;
  }

  private broadcast(ev: ProcessEvent, size: number): void {
    for (const q of this.queues) q.push(ev, size);
    this.updateFlow();
  }

  private updateFlow(): void {
    let full = false;
    for (const q of this.queues) if (q.full) full = true;
    if (full && !this.paused) {
      this.paused = true;
      for (const s of this.sources) s.pause();
    } else if (!full && this.paused) {
      this.paused = false;
      for (const s of this.sources) s.resume();
    }
  }

  private finish(end: ProcessEvent): void {
    if (this.ended) return;
    this.ended = true;
    for (const q of [...this.queues]) {
      q.push(end);
      q.close();
    }
    this.queues.clear();
    this.onEnd(this);
    this.markEnded();
  }

  writeInput(data: Uint8Array): void {
    if (this.term) {
      this.term.write(Buffer.from(data));
      return;
    }
    if (!this.stdinOpen || !this.child?.stdin || this.child.stdin.destroyed) {
      throw new ConnectError(`stdin of process ${this.pid} is not open`, Code.FailedPrecondition);
    }
    this.child.stdin.write(data);
  }

  closeStdin(): void {
    if (this.term) {
      throw new ConnectError(`process ${this.pid} has a terminal; send Ctrl-D (0x04) as input instead`, Code.FailedPrecondition);
    }
    if (!this.stdinOpen || !this.child?.stdin) {
      throw new ConnectError(`stdin of process ${this.pid} is not open`, Code.FailedPrecondition);
    }
    this.stdinOpen = false;
    this.child.stdin.end();
  }

  resize(cols: number, rows: number): void {
    if (!this.term) throw new ConnectError(`process ${this.pid} has no terminal to resize`, Code.FailedPrecondition);
    if (cols < 1 || rows < 1) throw new ConnectError(`terminal size ${cols}x${rows} is invalid`, Code.InvalidArgument);
    this.term.resize(cols, rows);
  }

  /** Sends `signal` to the process's group, or to the process when it has left it. */
  signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch {
      try {
        process.kill(this.pid, signal);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
  }
}

export class ProcessManager {
  private readonly byPid = new Map<number, ManagedProcess>();
  private readonly byTag = new Map<string, ManagedProcess>();

  async start(spec: ProcessSpec): Promise<ManagedProcess> {
    if (spec.tag !== undefined && this.byTag.has(spec.tag)) {
      throw new ConnectError(`a running process already has tag '${spec.tag}'`, Code.AlreadyExists);
    }
    const proc = await ManagedProcess.start(spec, (p) => this.forget(p));
    this.byPid.set(proc.pid, proc);
    if (proc.tag !== undefined) this.byTag.set(proc.tag, proc);
    return proc;
  }

  private forget(p: ManagedProcess): void {
    this.byPid.delete(p.pid);
    if (p.tag !== undefined && this.byTag.get(p.tag) === p) this.byTag.delete(p.tag);
  }

  find(selector: { case: 'pid'; value: number } | { case: 'tag'; value: string } | { case: undefined; value?: undefined }): ManagedProcess {
    if (selector.case === 'pid') {
      const p = this.byPid.get(selector.value);
      if (!p) throw new ConnectError(`process with pid ${selector.value} not found`, Code.NotFound);
      return p;
    }
    if (selector.case === 'tag') {
      const p = this.byTag.get(selector.value);
      if (!p) throw new ConnectError(`process with tag '${selector.value}' not found`, Code.NotFound);
      return p;
    }
    throw new ConnectError('a process selector (pid or tag) is required', Code.InvalidArgument);
  }

  list(): ManagedProcess[] {
    return [...this.byPid.values()];
  }

  has(pid: number): boolean {
    return this.byPid.has(pid);
  }

  /** Ends every process: SIGTERM, then SIGKILL for those still running after `graceMs`. */
  async shutdown(graceMs = 2000): Promise<void> {
    const running = this.list();
    for (const p of running) p.signal('SIGTERM');
    const deadline = Date.now() + graceMs;
    while (this.byPid.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    for (const p of this.list()) p.signal('SIGKILL');
  }
}

/**
 * When the sandbox runs out of memory, the kernel kills the process with the
 * highest score. Raising a child's score needs no privilege (lowering
 * envd's own would), so user processes go before envd does. A piped
 * command gets it from the native spawn before it runs; a terminal, which
 * node-pty starts, right after.
 */
const CHILD_OOM_SCORE_ADJ = 500;

function preferForOomKill(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, String(CHILD_OOM_SCORE_ADJ));
  } catch {
    // The process may be gone already.
  }
}
