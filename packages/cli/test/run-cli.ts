// The `paddock` command run as a process against a server of the test,
// pointed at it by PADDOCK_* variables, never synchronously (the server
// runs in the test's own process).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { API_KEY } from '../../server/test/harness.js';

const main = join(import.meta.dirname, '../dist/main.js');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runPaddock(args: string[], opts: { home: string; apiUrl: string; cwd?: string; timeoutMs?: number }): Promise<Ran> {
  const env = { ...process.env, PADDOCK_HOME: opts.home, PADDOCK_API_URL: opts.apiUrl, PADDOCK_API_KEY: API_KEY, NO_COLOR: '1' };
  const child = spawn(process.execPath, [main, ...args], { env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 300_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}
