// Commands with piped stdio, started through the native spawn
// (native/envd_native.c): Node's child_process.spawn forks envd, which costs
// ~1 ms of envd's event loop per command, as much as the rest of a short
// command's round trip. The child looks to its user as Node's would: its
// own session, stdio on unix sockets (or stdin from /dev/null), the user's
// uid and gid with no supplementary groups, default signal handling.
import { EventEmitter } from 'node:events';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { native } from './native.js';

export interface PipedSpawnOptions {
  cmd: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  uid: number;
  gid: number;
  /** A pipe to its stdin; without it the command reads end-of-file at once. */
  stdin: boolean;
  /** Its OOM score adjustment (/proc/<pid>/oom_score_adj), set before it runs; envd's own when omitted. */
  oomScoreAdj?: number | undefined;
}

/** glibc's execvp searches this when the environment has no PATH. */
const EXECVP_DEFAULT_PATH = '/bin:/usr/bin';

/** Where `cmd` may be, in the order execvp tries: as given when it has a slash, else along PATH. */
function candidates(cmd: string, path: string | undefined): string[] {
  if (cmd.includes('/')) return [cmd];
  return (path ?? EXECVP_DEFAULT_PATH).split(':').map((dir) => join(dir || '.', cmd));
}

const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(osConstants.signals).map(([name, n]) => [n, name as NodeJS.Signals]),
);

/** Children whose exit is still to be collected, by pid. */
const running = new Map<number, PipedChild>();
let watching = false;

/**
 * A running command. Emits `exit` (code, signal) when it ends and `close`
 * once stdout and stderr are closed as well, as a Node ChildProcess does.
 */
export class PipedChild extends EventEmitter {
  readonly stdin: Writable | undefined;
  readonly stdout: Readable;
  readonly stderr: Readable;
  #exit: [number | null, NodeJS.Signals | null] | undefined;
  #openOutputs = 2;

  private constructor(
    readonly pid: number,
    fds: { stdin: number; stdout: number; stderr: number },
  ) {
    super();
    this.stdin = fds.stdin >= 0 ? new Socket({ fd: fds.stdin, readable: false, writable: true }) : undefined;
    this.stdout = new Socket({ fd: fds.stdout, readable: true, writable: false });
    this.stderr = new Socket({ fd: fds.stderr, readable: true, writable: false });
    for (const out of [this.stdout, this.stderr]) {
      out.once('close', () => {
        this.#openOutputs -= 1;
        this.#maybeClose();
      });
    }
  }

  /** Starts `cmd`; throws an errno error (`ENOENT`, `EACCES`, ...) when it cannot. */
  static spawn(opts: PipedSpawnOptions): PipedChild {
    const env = Object.entries(opts.env).map(([k, v]) => `${k}=${v}`);
    for (const s of [opts.cmd, opts.cwd, ...opts.args, ...env]) {
      if (s.includes('\0')) throw new TypeError(`'${s.replace(/\0/g, '\\0')}' contains a NUL byte`);
    }
    if (!watching) {
      // Exits arrive as SIGCHLD; libuv collects only the children it started itself.
      process.on('SIGCHLD', () => PipedChild.#collectExited());
      watching = true;
    }
    const [pid, stdin, stdout, stderr] = native.spawn(
      candidates(opts.cmd, opts.env.PATH),
      [opts.cmd, ...opts.args],
      env,
      opts.cwd,
      opts.uid,
      opts.gid,
      opts.stdin,
      opts.oomScoreAdj ?? null,
    );
    // Registered before anything else runs: its SIGCHLD is handled on a later turn of the event loop.
    const child = new PipedChild(pid, { stdin, stdout, stderr });
    running.set(pid, child);
    return child;
  }

  /** Whether `pid` is a child started here whose exit is still to be collected. */
  static owns(pid: number): boolean {
    return running.has(pid);
  }

  static #collectExited(): void {
    for (const [pid, child] of running) {
      let status: [number, number] | null;
      try {
        status = native.waitStatus(pid);
      } catch {
        // Collected by someone else: it ended, how is lost.
        status = [-1, 0];
      }
      if (!status) continue;
      running.delete(pid);
      const [code, signo] = status;
      child.#exited(signo ? null : code, signo ? (signalNames.get(signo) ?? null) : null);
    }
  }

  #exited(code: number | null, signal: NodeJS.Signals | null): void {
    this.#exit = [code, signal];
    this.emit('exit', code, signal);
    this.#maybeClose();
  }

  #maybeClose(): void {
    if (this.#exit && this.#openOutputs === 0) this.emit('close', ...this.#exit);
  }
}
