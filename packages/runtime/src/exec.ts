// Runs host commands (runc, mount, cp) and turns failures into errors that
// say which command failed and what it printed.
import { execFile } from 'node:child_process';

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

export function run(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string; cwd?: string; env?: NodeJS.ProcessEnv; signal?: AbortSignal } = {}): Promise<ExecResult> {
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
