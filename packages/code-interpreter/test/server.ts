// The code-interpreter server run on this host as the template runs it in a
// sandbox (Debian's python3 with its Jupyter packages), for the tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../tools/testing/ports.mjs';

export const SERVER_DIR = fileURLToPath(new URL('../server', import.meta.url));
/** Debian's python3, whose packages the template installs (not a python3 earlier on PATH). */
export const PYTHON = '/usr/bin/python3';

export interface RunningServer {
  url: string;
  proc: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

export async function startServer(opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<RunningServer> {
  const port = await freePort();
  const args = ['-m', 'paddock_code_interpreter', '--host', '127.0.0.1', '--port', String(port), '--envd-url', ''];
  if (opts.cwd) args.push('--cwd', opts.cwd);
  const proc = spawn(PYTHON, args, { cwd: SERVER_DIR, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: '1', ...opts.env } });
  let log = '';
  proc.stdout!.on('data', (b: Buffer) => (log += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (log += b.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`the server exited (${proc.exitCode}):\n${log}`);
    const res = await fetch(`${url}/health`).catch(() => undefined);
    if (res?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`the server was not ready within 60 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    proc,
    output: () => log,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export type Message = Record<string, unknown> & { type: string };

/** POST /execute, its answer's lines parsed. */
export async function execute(url: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Message[]> {
  const res = await fetch(`${url}/execute`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal });
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  const text = await res.text();
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Message);
}

export const stdout = (msgs: Message[]) => msgs.filter((m) => m.type === 'stdout').map((m) => m.text).join('');
export const mainResult = (msgs: Message[]) => msgs.find((m) => m.type === 'result' && m.is_main_result === true);
