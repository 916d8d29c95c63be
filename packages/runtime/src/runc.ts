// The OCI runtime's command line (runc, or crun, which takes the same
// commands and options), with its state kept in a directory of our own so
// that our containers are never confused with anyone else's.
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { CommandError, run } from './exec.js';
import { spawnProgram, spawnWithOutput } from './spawn.js';

export type RuncStatus = 'creating' | 'created' | 'running' | 'pausing' | 'paused' | 'stopped';

export interface RuncContainer {
  id: string;
  pid: number;
  status: RuncStatus;
  bundle: string;
}

/**
 * A container's first process, known by its pid and when it started: the
 * start time tells it from a later process that was given the same pid.
 */
export class InitProcess {
  private readonly started: string | undefined;

  constructor(readonly pid: number) {
    this.started = processStart(pid);
  }

  /** Whether it still runs (a read of /proc; a zombie has ended). */
  running(): boolean {
    return this.started !== undefined && processStart(this.pid) === this.started;
  }
}

/** How often list() asks again when a container went while runc listed (a few ms each). */
const LIST_ATTEMPTS = 5;

/** runc prints `time=... level=error msg="..."`; keep the message. */
function runcMessage(stderr: string): string {
  const m = /msg="((?:[^"\\]|\\.)*)"/.exec(stderr);
  return m ? m[1]!.replace(/\\"/g, '"') : stderr.trim();
}

/** The OCI runtimes the runtime drives; both take runc's command line. */
export type OciRuntimeName = 'runc' | 'crun';
export const OCI_RUNTIMES: readonly OciRuntimeName[] = ['runc', 'crun'];

/**
 * A container that is not there: runc says it does not exist, crun that its
 * state file (`ROOT/ID/status`) cannot be opened.
 */
const NOT_THERE = /does not exist|not exist|opening file `[^`]*\/status`: No such file or directory/i;

export function containerMissing(stderr: string): boolean {
  return NOT_THERE.test(stderr);
}

export class Runc {
  /**
   * `binary`: the OCI runtime's program. `launcher`: a program that is
   * given it and its arguments and executes it (the legacy-cgroups
   * launcher, for crun on a hybrid cgroup host); `binary` is then absolute.
   */
  constructor(
    private readonly root: string,
    private readonly binary = 'runc',
    private readonly name: OciRuntimeName = 'runc',
    private readonly launcher?: string,
  ) {}

  /** The program and arguments that run the OCI runtime with `args`. */
  private command(args: string[]): [string, string[]] {
    return this.launcher ? [this.launcher, [this.binary, ...args]] : [this.binary, args];
  }

  private async call(args: string[]): Promise<string> {
    try {
      const [program, argv] = this.command(['--root', this.root, ...args]);
      return (await run(program, argv)).stdout;
    } catch (err) {
      if (err instanceof CommandError) throw new CommandError(`${this.name} ${args[0]}`, err.code, runcMessage(err.stderr));
      throw err;
    }
  }

  /**
   * Starts a container detached. The container inherits runc's stdio, so
   * both go to `logFile` and nothing ties the container to this process,
   * which may restart while it runs on. runc's own messages go to a JSON log
   * beside it, read back when the start fails. Resolves with the
   * container's first process (its pid from `--pid-file`), whose
   * `running()` is a read of /proc where `runc state` costs a process start:
   * a boot asks while it waits for envd.
   *
   * `passFds` become the container process's descriptors 3, 4, ... (runc's
   * `--preserve-fds`); runc has its copies from the moment it is spawned,
   * so the caller may close its own once this returns or fails.
   */
  async runDetached(id: string, bundle: string, logFile: string, passFds: number[] = []): Promise<InitProcess> {
    const runcLog = `${logFile}.runc`;
    const pidFile = join(bundle, 'init.pid');
    rmSync(runcLog, { force: true });
    rmSync(pidFile, { force: true });
    const log = openSync(logFile, 'a');
    try {
      const [program, argv] = this.command([
        ...['--root', this.root, '--log', runcLog, '--log-format', 'json', 'run', '--detach', '--pid-file', pidFile, '--bundle', bundle],
        ...(passFds.length ? ['--preserve-fds', String(passFds.length)] : []),
        id,
      ]);
      // Not child_process.spawn: that forks this whole process (spawn.ts).
      const { code, signal } = await spawnProgram(program, argv, [null, log, log], passFds).exited;
      if (code !== 0) throw new CommandError(`${this.name} run`, code, signal ? `killed by signal ${signal}` : (lastRuncError(runcLog) ?? ''));
    } finally {
      closeSync(log);
    }
    return new InitProcess(Number(readFileSync(pidFile, 'utf8').trim()));
  }

  /**
   * Runs a container to its end in the foreground. runc relays the
   * process's stdout and stderr (through pipes it makes, owned by the
   * container's root, as envd's are) to `onOutput`; the container's pid is
   * in `<bundle>/init.pid` while it runs. Resolves with the process's exit
   * code (128 + the signal's number for one a signal ended), and with
   * runc's own error when the process could not start; runc deletes the
   * container after.
   */
  async runForeground(id: string, bundle: string, onOutput: (stream: 'stdout' | 'stderr', bytes: Buffer) => void): Promise<{ exitCode: number; runcError?: string }> {
    const runcLog = join(bundle, 'runc.log');
    rmSync(runcLog, { force: true });
    rmSync(join(bundle, 'init.pid'), { force: true });
    const [program, argv] = this.command(['--root', this.root, '--log', runcLog, '--log-format', 'json', 'run', '--pid-file', join(bundle, 'init.pid'), '--bundle', bundle, id]);
    // Not child_process.spawn: that forks this whole process (spawn.ts). Ended: the exit, and all output read.
    const { code, signal } = await spawnWithOutput(program, argv, onOutput).ended;
    const exitCode = code ?? 128 + (signal ?? 0);
    const runcError = exitCode === 0 ? undefined : lastRuncError(runcLog, false);
    return { exitCode, ...(runcError ? { runcError } : {}) };
  }

  /** The first line of `runc --version` (or crun's): fails when the program is missing or does not run. */
  async version(): Promise<string> {
    const [program, argv] = this.command(['--version']);
    return (await run(program, argv)).stdout.split('\n')[0] ?? '';
  }

  /**
   * Every container under the root. runc 1.1 (Debian 12 ships 1.1.5) reads
   * the root directory and then stats each entry, and gives up on the whole
   * list with `stat ROOT/ID: no such file or directory` when a container is
   * deleted in between. Here that is an ordinary moment (a sandbox destroyed
   * while the sandboxes are listed), so the list is asked for again: the
   * next one no longer sees that container.
   */
  async list(): Promise<RuncContainer[]> {
    let out: string;
    for (let attempt = 1; ; attempt++) {
      try {
        out = await this.call(['list', '--format', 'json']);
        break;
      } catch (err) {
        if (attempt < LIST_ATTEMPTS && err instanceof CommandError && this.deletedMeanwhile(err.stderr)) continue;
        throw err;
      }
    }
    const parsed = JSON.parse(out.trim() || 'null') as Array<{ id: string; pid: number; status: RuncStatus; bundle: string }> | null;
    return (parsed ?? []).map(({ id, pid, status, bundle }) => ({ id, pid, status, bundle }));
  }

  /** Whether runc's message is a stat of an entry of the root that is gone (see list). */
  private deletedMeanwhile(message: string): boolean {
    const m = /^stat (.+): no such file or directory$/.exec(message.trim());
    return !!m && dirname(m[1]!) === resolve(this.root);
  }

  async state(id: string): Promise<RuncContainer | undefined> {
    try {
      const s = JSON.parse(await this.call(['state', id])) as { id: string; pid: number; status: RuncStatus; bundle: string };
      return { id: s.id, pid: s.pid, status: s.status, bundle: s.bundle };
    } catch (err) {
      if (err instanceof CommandError && containerMissing(err.stderr)) return undefined;
      throw err;
    }
  }

  async pause(id: string): Promise<void> {
    await this.call(['pause', id]);
  }

  async resume(id: string): Promise<void> {
    await this.call(['resume', id]);
  }

  /**
   * Kills and removes the container; a container that does not exist is fine.
   *
   * `runc delete --force` sleeps 100 ms after its SIGKILL before it looks
   * again, and that sleep was most of what killing a sandbox took. A running
   * container is therefore killed here, its init process watched until it is
   * gone (the kernel then kills the rest of its PID namespace), and the
   * stopped container deleted: a few ms. Anything else (a paused container,
   * an init that outlives the wait) takes runc's own way.
   *
   * `runningInit` is the pid of the container's init when the caller knows
   * it runs, unfrozen; that spares the `runc state` (a process start) that
   * finds it out. The caller answers for the pid being the
   * container's. Should the container have stopped or been paused since,
   * that costs only time: `runc delete` refuses a container that is not
   * stopped, and the forced delete follows.
   */
  async deleteForce(id: string, runningInit?: number): Promise<void> {
    try {
      let pid = runningInit;
      if (pid === undefined) {
        const state = await this.state(id);
        if (!state) return;
        if (state.status === 'running') pid = state.pid;
      }
      if (pid !== undefined && (await this.killAndWait(pid))) {
        try {
          await this.call(['delete', id]);
          return;
        } catch {
          // Fall through to the forced delete, which says what is wrong.
        }
      }
      await this.call(['delete', '--force', id]);
    } catch (err) {
      if (err instanceof CommandError && containerMissing(err.stderr)) return;
      throw err;
    }
  }

  /**
   * Ends a running container's processes, leaving it stopped (for `delete`):
   * true once its init, `pid`, is gone, and with it every process of its PID
   * namespace, which the kernel kills and waits for before init's own end.
   */
  async killInit(pid: number): Promise<boolean> {
    return this.killAndWait(pid);
  }

  /**
   * SIGKILL to the container's init; true once that process is gone (within
   * `waitMs`). The signal is sent here rather than by `runc kill`, which does
   * no more for a running container and costs a process start.
   */
  private async killAndWait(pid: number, waitMs = 2_000): Promise<boolean> {
    const started = processStart(pid);
    if (started === undefined) return true;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile: the check below sees it.
    }
    const deadline = Date.now() + waitMs;
    for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
      if (processStart(pid) !== started) return true;
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

/**
 * When process `pid` started (field 22 of /proc/PID/stat), or undefined once
 * it is gone or a zombie. The start time tells a new process that was given
 * the same pid from the one we knew.
 */
export function processStart(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  return fields[19];
}

/** The last error runc wrote to its JSON log; with `orText`, the log's text when it holds none. */
function lastRuncError(file: string, orText = true): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return orText ? 'runc wrote no log' : undefined;
  }
  const errors = text
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l) as { level?: string; msg?: string };
      } catch {
        return { level: 'error', msg: l };
      }
    })
    .filter((e) => e.level === 'error' || e.level === 'fatal');
  return errors.at(-1)?.msg ?? (orText ? text.trim() : undefined);
}
