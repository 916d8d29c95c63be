// Runs host commands (runc, mount, cp) and turns failures into errors that
// say which command failed and what it printed.
import { execFile } from 'node:child_process';
import { spawnWithOutput } from './spawn.js';

export interface ExecResult {
  stdout: string;
  stderr: string;
}

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`${command} failed${code === null ? '' : ` (exit ${code})`}: ${stderr.trim() || 'no output'}`);
    this.name = 'CommandError';
  }
}

/**
 * Runs a program to its end, with `input` as its standard input; its
 * output, or a CommandError naming it. Started without forking this process
 * (runUnforked) unless it needs a working directory, an environment or a
 * signal of its own.
 */
export function run(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string; cwd?: string; env?: NodeJS.ProcessEnv; signal?: AbortSignal } = {}): Promise<ExecResult> {
  if (!opts.cwd && !opts.env && !opts.signal) return runUnforked(cmd, args, opts);
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 60_000, ...(opts.cwd ? { cwd: opts.cwd } : {}), ...(opts.env ? { env: opts.env } : {}), ...(opts.signal ? { signal: opts.signal } : {}) },
      (err, stdout, stderr) => {
        if (err) {
          const code = typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null;
          // The spawn itself failed: the program is not there (Node's own words are `spawn runc ENOENT`).
          const missing = (err as { code?: unknown }).code === 'ENOENT';
          const why = missing ? `'${cmd}' is not installed (not found${cmd.includes('/') ? '' : ' on PATH'})` : stderr || err.message;
          reject(new CommandError([cmd, ...args].join(' '), code, why));
        } else {
          resolve({ stdout, stderr });
        }
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/**
 * Runs a program without forking this process (spawn.ts: child_process
 * forks the whole server, 10-25 ms with its event loop stopped), with
 * `input` as its standard input; a timeout kills it.
 */
export async function runUnforked(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<ExecResult> {
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  let started;
  try {
    started = spawnWithOutput(cmd, args, (stream, bytes) => out[stream].push(bytes), 'native', opts.input);
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw new CommandError([cmd, ...args].join(' '), null, missing ? `'${cmd}' is not installed (not found${cmd.includes('/') ? '' : ' on PATH'})` : (err as Error).message);
  }
  const { pid, exited, ended } = started;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Ended meanwhile.
    }
  }, opts.timeoutMs ?? 60_000);
  // Once it is collected its pid may be another's: no kill after that.
  void exited.finally(() => clearTimeout(timer)).catch(() => undefined);
  const { code, signal } = await ended.finally(() => clearTimeout(timer));
  const text = (stream: 'stdout' | 'stderr') => Buffer.concat(out[stream]).toString('utf8');
  if (code !== 0) {
    const why = timedOut ? `timed out after ${opts.timeoutMs ?? 60_000} ms` : signal ? `killed by signal ${signal}` : text('stderr');
    throw new CommandError([cmd, ...args].join(' '), code, why);
  }
  return { stdout: text('stdout'), stderr: text('stderr') };
}
