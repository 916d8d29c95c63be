// sandbox.commands against a real envd, through the SDK only.
import { join } from 'node:path';
import { CommandExitError, NotFoundError, SandboxError, TimeoutError, type Sandbox } from '../src/index.js';
import { eventually } from '../../../tools/testing/poll.mjs';
import { startEnvdWithSandbox, type LocalEnvd } from './support/envd.js';

let envd: LocalEnvd;
let sbx: Sandbox;
beforeAll(async () => ({ envd, sbx } = await startEnvdWithSandbox()));
afterAll(() => envd.stop());

/** Index of the first character where `a` and `b` differ, -1 when equal; a readable failure for huge strings. */
function firstDifference(a: string, b: string): number {
  if (a === b) return -1;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('run in the foreground', () => {
  test('gives exit code and output, streamed to the callbacks as it comes', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const result = await sbx.commands.run('echo one; echo two >&2; printf "é"; echo three', {
      onStdout: (d) => void out.push(d),
      onStderr: (d) => void err.push(d),
    });
    expect(result).toEqual({ exitCode: 0, error: undefined, stdout: 'one\néthree\n', stderr: 'two\n' });
    expect(out.join('')).toBe(result.stdout);
    expect(err.join('')).toBe('two\n');
  });

  test('tens of MiB of output arrive whole and in order, multi-byte characters split across chunks included', async () => {
    // About 60 MiB: many protocol messages, each cut at an arbitrary byte.
    const lines = 6_000_000;
    const expected = Array.from({ length: lines }, (_, i) => `é${i + 1}\n`).join('');
    const chunks: string[] = [];
    const result = await sbx.commands.run(`seq -f 'é%.0f' 1 ${lines}`, { onStdout: (d) => void chunks.push(d), timeoutMs: 0 });
    expect(chunks.length).toBeGreaterThan(100);
    expect(firstDifference(result.stdout, expected)).toBe(-1);
    expect(firstDifference(chunks.join(''), expected)).toBe(-1);
  });

  test('runs through a login bash, as the default user in its home, or as asked', async () => {
    const who = await sbx.commands.run('echo "$0|$(id -u)|$PWD|$HOME"');
    expect(who.stdout).toBe(`/bin/bash|1000|${envd.home.user}|${envd.home.user}\n`);
    const root = await sbx.commands.run('id -u; pwd', { user: 'root', cwd: '/tmp' });
    expect(root.stdout).toBe('0\n/tmp\n');
  });

  test('a non-zero exit is a CommandExitError that keeps the output', async () => {
    const run = sbx.commands.run('echo partial; echo oops >&2; exit 3');
    await expect(run).rejects.toBeInstanceOf(CommandExitError);
    await expect(run).rejects.toBeInstanceOf(SandboxError);
    await expect(run).rejects.toMatchObject({ exitCode: 3, stdout: 'partial\n', stderr: 'oops\n', name: 'CommandExitError' });
  });

  test('stdin is closed unless asked for', async () => {
    // With no stdin, `cat` reads end-of-file at once instead of waiting forever.
    const result = await sbx.commands.run('cat; echo done', { timeoutMs: 5000 });
    expect(result.stdout).toBe('done\n');
  });

  test('per-command envs apply to that command only', async () => {
    const first = await sbx.commands.run('echo "${SDK_ONLY_HERE:-unset}"', { envs: { SDK_ONLY_HERE: 'set' } });
    expect(first.stdout).toBe('set\n');
    const later = await sbx.commands.run('echo "${SDK_ONLY_HERE:-unset}"');
    expect(later.stdout).toBe('unset\n');
  });

  test('timeoutMs ends the command with a TimeoutError, and envd kills it', async () => {
    const marker = join(envd.dir, 'work/timeout-marker');
    const started = Date.now();
    await expect(sbx.commands.run(`sleep 30; touch ${marker}`, { timeoutMs: 700 })).rejects.toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeLessThan(10_000);
    await eventually(async () => !(await sbx.commands.list()).some((p) => p.args.some((a) => a.includes(marker))), 'the process to be gone');
  });
});

describe('background commands', () => {
  test('list shows it, connect attaches by pid, kill ends it', async () => {
    const handle = await sbx.commands.run('echo started; sleep 60', { background: true, envs: { TAGGED: 'yes' } });
    expect(handle.pid).toBeGreaterThan(0);
    await eventually(() => handle.stdout === 'started\n', 'first output');

    const listed = (await sbx.commands.list()).find((p) => p.pid === handle.pid);
    expect(listed).toMatchObject({ cmd: '/bin/bash', args: ['-l', '-c', 'echo started; sleep 60'] });
    expect(listed?.envs.TAGGED).toBe('yes');

    await handle.disconnect();
    await expect(handle.wait()).rejects.toThrow(/disconnected/);
    const attached = await sbx.commands.connect(handle.pid);
    expect(attached.pid).toBe(handle.pid);

    expect(await attached.kill()).toBe(true);
    const end = attached.wait();
    await expect(end).rejects.toBeInstanceOf(CommandExitError);
    await expect(end).rejects.toMatchObject({ exitCode: -1 });
    expect(attached.exitCode).toBe(-1);
    expect(await sbx.commands.kill(handle.pid)).toBe(false);
    await expect(sbx.commands.connect(handle.pid)).rejects.toBeInstanceOf(NotFoundError);
  });

  test('output arrives on a connected handle after the disconnect of the first one', async () => {
    const first = await sbx.commands.run('read line; echo "got $line"', { background: true, stdin: true });
    await first.disconnect();
    const chunks: string[] = [];
    const second = await sbx.commands.connect(first.pid, { onStdout: (d) => void chunks.push(d) });
    await sbx.commands.sendStdin(first.pid, 'hello\n');
    const result = await second.wait();
    expect(result.stdout).toBe('got hello\n');
    expect(chunks.join('')).toBe('got hello\n');
    expect(first.stdout).toBe('');
  });

  test('stdin: sendStdin then closeStdin gives the command end-of-file', async () => {
    const handle = await sbx.commands.run('wc -c; echo bye', { background: true, stdin: true });
    await handle.sendStdin('12345');
    await handle.sendStdin(new Uint8Array([0x36, 0x37]));
    await handle.closeStdin();
    const result = await handle.wait();
    expect(result.stdout).toBe('7\nbye\n');
  });

  test('a callback that throws ends wait() with its error', async () => {
    const boom = new Error('callback failed');
    const handle = await sbx.commands.run('echo x; sleep 5', {
      background: true,
      onStdout: () => {
        throw boom;
      },
    });
    await expect(handle.wait()).rejects.toBe(boom);
    await handle.kill();
  });
});
