// sandbox.commands and sandbox.pty with the official e2b SDK.
import { CommandExitError, Sandbox, TimeoutError } from 'e2b';
import { eventually, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
let sbx: Sandbox;
beforeAll(async () => {
  c = await startForE2b();
  sbx = await Sandbox.create('base');
});
afterAll(async () => {
  await sbx.kill();
  await c.teardown();
});

test('run streams stdout and stderr to the callbacks and returns the result', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const r = await sbx.commands.run('for i in 1 2 3; do echo out$i; echo err$i >&2; done', {
    onStdout: (d) => void out.push(d),
    onStderr: (d) => void err.push(d),
  });
  expect(r).toMatchObject({ exitCode: 0, stdout: 'out1\nout2\nout3\n', stderr: 'err1\nerr2\nerr3\n' });
  expect(out.join('')).toBe('out1\nout2\nout3\n');
  expect(err.join('')).toBe('err1\nerr2\nerr3\n');
});

test('a non-zero exit throws CommandExitError with the code and output', async () => {
  const e = await sbx.commands.run('echo partial; exit 7').catch((x: unknown) => x);
  expect(e).toBeInstanceOf(CommandExitError);
  expect(e).toMatchObject({ exitCode: 7, stdout: 'partial\n' });
});

test('envs, cwd and user', async () => {
  expect((await sbx.commands.run('echo $A-$B', { envs: { A: '1', B: '2' } })).stdout).toBe('1-2\n');
  expect((await sbx.commands.run('echo "[$A]"')).stdout).toBe('[]\n');
  await sbx.files.makeDir('/tmp/work');
  expect((await sbx.commands.run('pwd', { cwd: '/tmp/work' })).stdout).toBe('/tmp/work\n');
  expect((await sbx.commands.run('whoami')).stdout).toBe('user\n');
  expect((await sbx.commands.run('whoami', { user: 'root' })).stdout).toBe('root\n');
});

test('background commands: list, connect, kill', async () => {
  const handle = await sbx.commands.run('echo begin; sleep 30; echo never', { background: true });
  expect(handle.pid).toBeGreaterThan(0);
  const listed = await sbx.commands.list();
  expect(listed.find((p) => p.pid === handle.pid)).toMatchObject({ cmd: '/bin/bash', args: ['-l', '-c', 'echo begin; sleep 30; echo never'] });
  const attached = await sbx.commands.connect(handle.pid);
  expect(attached.pid).toBe(handle.pid);
  expect(await sbx.commands.kill(handle.pid)).toBe(true);
  await expect(handle.wait()).rejects.toBeInstanceOf(CommandExitError);
  expect(handle.stdout).toContain('begin');
  expect(await sbx.commands.kill(handle.pid)).toBe(false);
});

test('sendStdin and closeStdin reach a command that reads stdin', async () => {
  const handle = await sbx.commands.run('cat', { background: true, stdin: true });
  await sbx.commands.sendStdin(handle.pid, 'line one\n');
  await sbx.commands.sendStdin(handle.pid, 'line two\n');
  await sbx.commands.closeStdin(handle.pid);
  const result = await handle.wait();
  expect(result).toMatchObject({ exitCode: 0, stdout: 'line one\nline two\n' });
});

test('timeoutMs ends a command that runs too long', async () => {
  const started = Date.now();
  await expect(sbx.commands.run('sleep 30', { timeoutMs: 1000 })).rejects.toBeInstanceOf(TimeoutError);
  expect(Date.now() - started).toBeLessThan(10_000);
  await eventually(async () => !(await sbx.commands.list()).some((p) => p.args.includes('sleep 30')), 'the timed-out process to end');
});

test('pty: create, sendInput, resize, kill', async () => {
  let output = '';
  const decoder = new TextDecoder();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (output += decoder.decode(d)) });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo cols=$(tput cols)\n'));
  await eventually(() => output.includes('cols=80'), `tput in the pty, got ${JSON.stringify(output)}`);
  await sbx.pty.resize(pty.pid, { cols: 120, rows: 30 });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo size=$(stty size)\n'));
  await eventually(() => output.includes('size=30 120'), 'the new size');
  expect(await sbx.pty.kill(pty.pid)).toBe(true);
  await expect(pty.wait()).rejects.toBeInstanceOf(CommandExitError);
});
