// Starting a program without forking this process (native/spawn.c): Node's
// child_process.spawn copies the whole process's page tables for each child
// (5 ms for a bare node, 25 ms for one of 400 MB here, while the event loop
// waits); posix_spawn shares the memory until the child execs. Used for the
// OCI runtime's `run`, which is on the path of every cold create and of
// every build step, and for every other command the runtime runs (exec.ts).
import { spawn } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, openSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { createRequire } from 'node:module';
import { isAbsolute, join } from 'node:path';

interface SpawnNative {
  /** Whether the kernel has pidfd_open (Linux 5.3): without it, child_process.spawn is used. */
  supported: boolean;
  spawn(file: string, argv: string[], fds: number[], onExit: (code: number, signal: number) => void): number;
  /** pipe2(O_CLOEXEC): its read end, then its write end. */
  pipe(): [number, number];
}

let native: SpawnNative | undefined;

function load(): SpawnNative {
  const file = join(import.meta.dirname, '../build/Release/runtime_spawn.node');
  if (!existsSync(file)) throw new Error(`the runtime's spawn addon was not found at '${file}'; run the runtime build`);
  return createRequire(import.meta.url)(file) as SpawnNative;
}

export interface SpawnedExit {
  /** Its exit status, or null when a signal ended it. */
  code: number | null;
  /** The signal's number that ended it, or null. */
  signal: number | null;
}

export interface Spawned {
  pid: number;
  /** Resolves once it ended (it is collected then: no zombie stays). */
  exited: Promise<SpawnedExit>;
}

/**
 * Starts `program` (a path, or a name looked up on PATH) with `args`. `stdio`
 * are its descriptors 0, 1, 2 (null: /dev/null), `passFds` its 3, 4, ...;
 * it gets no other descriptor of this process, every signal at its default
 * and none blocked, and this process's environment. Throws an errno error
 * (code ENOENT, EACCES...) when it cannot be started. `how`: 'fork' takes
 * child_process.spawn, as on a kernel without pidfd_open (Linux < 5.3).
 */
export function spawnProgram(program: string, args: string[], stdio: [number | null, number | null, number | null], passFds: number[] = [], how: 'native' | 'fork' = 'native'): Spawned {
  native ??= load();
  const file = isAbsolute(program) ? program : onPath(program);
  if (!file) throw Object.assign(new Error(`spawn '${program}': not found on PATH`), { code: 'ENOENT' });
  if (how === 'fork' || !native.supported) return forked(file, program, args, stdio, passFds);
  let devNull: number | undefined;
  const fd = (f: number | null) => f ?? (devNull ??= openSync('/dev/null', 'r+'));
  try {
    let settle!: (exit: SpawnedExit) => void;
    const exited = new Promise<SpawnedExit>((resolve) => (settle = resolve));
    const pid = native.spawn(file, [program, ...args], [...stdio.map(fd), ...passFds], (code, signal) => settle({ code: code < 0 ? null : code, signal: signal || null }));
    return { pid, exited };
  } finally {
    if (devNull !== undefined) closeSync(devNull);
  }
}

/**
 * Starts `program` as spawnProgram does, its standard output and error
 * pipes read as they come, on the event loop, into `onOutput`; its standard
 * input is `input` through a pipe, or /dev/null. `exited` resolves once it
 * ended (collected), `ended` once it ended and both output pipes were read
 * to their end.
 */
export function spawnWithOutput(
  program: string,
  args: string[],
  onOutput: (stream: 'stdout' | 'stderr', bytes: Buffer) => void,
  how: 'native' | 'fork' = 'native',
  input?: string,
): Spawned & { ended: Promise<SpawnedExit> } {
  native ??= load();
  // [stdout read, stdout write, stderr read, stderr write, stdin read, stdin write]
  const ends: number[] = [];
  let spawned: Spawned;
  try {
    ends.push(...native.pipe(), ...native.pipe(), ...(input !== undefined ? native.pipe() : []));
    spawned = spawnProgram(program, args, [ends[4] ?? null, ends[1]!, ends[3]!], [], how);
  } catch (err) {
    for (const fd of ends) closeSync(fd);
    throw err;
  }
  // The child has its copies of its ends: only it holds them open now.
  for (const i of [1, 3, 4]) if (ends[i] !== undefined) closeSync(ends[i]);
  if (input !== undefined) {
    const stdin = new Socket({ fd: ends[5]!, readable: false, writable: true });
    // A program that exits without reading all of it: what it left unread is of no use.
    stdin.once('error', () => stdin.destroy());
    stdin.end(input);
  }
  const read = (name: 'stdout' | 'stderr', fd: number) =>
    new Promise<void>((resolve) => {
      const pipe = new Socket({ fd, readable: true, writable: false });
      pipe.on('data', (bytes: Buffer) => onOutput(name, bytes));
      pipe.once('error', () => pipe.destroy());
      pipe.once('close', () => resolve());
    });
  const ended = Promise.all([spawned.exited, read('stdout', ends[0]!), read('stderr', ends[2]!)]).then(([exit]) => exit);
  return { pid: spawned.pid, exited: spawned.exited, ended };
}

/** The same through child_process.spawn, on a kernel without pidfd_open. */
function forked(file: string, program: string, args: string[], stdio: [number | null, number | null, number | null], passFds: number[]): Spawned {
  const child = spawn(file, args, { argv0: program, stdio: [...stdio.map((f) => f ?? 'ignore'), ...passFds] });
  const exited = new Promise<SpawnedExit>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal: signal === null ? null : osConstants.signals[signal] }));
  });
  if (child.pid === undefined) {
    // Its 'error' follows; the caller has this throw instead.
    exited.catch(() => undefined);
    throw Object.assign(new Error(`spawn '${file}' failed`), { code: 'ENOENT' });
  }
  return { pid: child.pid, exited };
}

/** Where `name` is on PATH, or undefined. */
export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
