// sandbox.commands and sandbox.pty with the official e2b SDK.
import { CommandExitError, TimeoutError, type Sandbox } from 'e2b';
import { eventually, startWithSandbox } from './harness.js';

let sbx: Sandbox;
let teardown: () => Promise<void>;
beforeAll(async () => ({ sbx, teardown } = await startWithSandbox()));
afterAll(() => teardown());

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
  expect(e).toMatchObject({ exitCode: 7, stdout: 'partial\n', error: 'exit status 7', message: 'exit status 7' });
});

test('envs, cwd and user', async () => {
  expect((await sbx.commands.run('echo $A-$B', { envs: { A: '1', B: '2' } })).stdout).toBe('1-2\n');
  expect((await sbx.commands.run('echo "[$A]"')).stdout).toBe('[]\n');
  await sbx.files.makeDir('/tmp/work');
  expect((await sbx.commands.run('pwd', { cwd: '/tmp/work' })).stdout).toBe('/tmp/work\n');
  expect((await sbx.commands.run('whoami')).stdout).toBe('user\n');
  expect((await sbx.commands.run('whoami', { user: 'root' })).stdout).toBe('root\n');
});

test('background commands: list, connect (output after it arrives there), kill', async () => {
  const cmd = 'echo begin; read -r word; echo "after $word"; sleep 30; echo never';
  const handle = await sbx.commands.run(cmd, { background: true, stdin: true });
  expect(handle.pid).toBeGreaterThan(0);
  await eventually(() => handle.stdout.includes('begin'), `the first line, got ${JSON.stringify(handle.stdout)}`);
  const listed = await sbx.commands.list();
  expect(listed.find((p) => p.pid === handle.pid)).toMatchObject({ cmd: '/bin/bash', args: ['-l', '-c', cmd] });
  await handle.disconnect();

  const seen: string[] = [];
  const attached = await sbx.commands.connect(handle.pid, { onStdout: (d) => void seen.push(d) });
  expect(attached.pid).toBe(handle.pid);
  await sbx.commands.sendStdin(handle.pid, 'reconnect\n');
  await eventually(() => attached.stdout.includes('after reconnect\n'), `output after connect, got ${JSON.stringify(attached.stdout)}`);
  expect(seen.join('')).toBe(attached.stdout);
  // Output from before the connect is not replayed.
  expect(attached.stdout).toBe('after reconnect\n');
  expect(await sbx.commands.kill(handle.pid)).toBe(true);
  const ended = await attached.wait().catch((e: unknown) => e);
  expect(ended).toBeInstanceOf(CommandExitError);
  const { exitCode, stdout } = ended as CommandExitError;
  expect({ exitCode, stdout }).toEqual({ exitCode: -1, stdout: 'after reconnect\n' });
  expect((ended as CommandExitError).message).toBe('signal: killed');
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
  await expect(sbx.commands.run('sleep 30', { timeoutMs: 1000 })).rejects.toBeInstanceOf(TimeoutError);
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

test("sandbox.git drives the sandbox's git: init, config, status, add, commit, branches, remotes", async () => {
  const repo = '/home/user/compat-repo';
  await sbx.git.init(repo, { initialBranch: 'main' });
  await sbx.git.configureUser('Compat Suite', 'compat@example.com', { scope: 'local', path: repo });
  expect(await sbx.git.getConfig('user.email', { scope: 'local', path: repo })).toBe('compat@example.com');
  await sbx.files.write(`${repo}/a.txt`, 'a');
  const dirty = await sbx.git.status(repo);
  expect(dirty).toMatchObject({ currentBranch: 'main', isClean: false, hasUntracked: true, untrackedCount: 1 });
  expect(dirty.fileStatus).toEqual([expect.objectContaining({ name: 'a.txt', status: 'untracked' })]);
  await sbx.git.add(repo);
  expect((await sbx.git.commit(repo, 'first commit')).stdout).toContain('first commit');
  expect(await sbx.git.status(repo)).toMatchObject({ isClean: true, totalCount: 0 });
  await sbx.git.createBranch(repo, 'feature');
  expect(await sbx.git.branches(repo)).toEqual({ branches: ['feature', 'main'], currentBranch: 'feature' });
  await sbx.git.checkoutBranch(repo, 'main');
  expect((await sbx.git.branches(repo)).currentBranch).toBe('main');
  await sbx.git.remoteAdd(repo, 'origin', 'https://example.com/compat.git');
  expect(await sbx.git.remoteGet(repo, 'origin')).toBe('https://example.com/compat.git');
  expect((await sbx.commands.run('git log --format=%an:%s', { cwd: repo })).stdout).toBe('Compat Suite:first commit\n');
});
