// The runtime's own spawn (native/spawn.c), which starts the OCI runtime
// without forking the server: real processes, their exit codes and signals,
// their descriptors, and nothing left behind in either process.
import { mkdtempSync, openSync, closeSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnProgram, spawnWithOutput } from '../src/spawn.js';
import { CommandError, run, runUnforked } from '../src/exec.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-spawn-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const openFds = () => readdirSync('/proc/self/fd').length;
/** Whether `pid` exists at all (a zombie does). */
const exists = (pid: number) => {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
};

test('gives the exit status, and the signal that ended a program', async () => {
  expect(await spawnProgram('/bin/sh', ['-c', 'exit 3'], [null, null, null]).exited).toEqual({ code: 3, signal: null });
  expect(await spawnProgram('true', [], [null, null, null]).exited).toEqual({ code: 0, signal: null });
  expect(await spawnProgram('/bin/sh', ['-c', 'kill -TERM $$'], [null, null, null]).exited).toEqual({ code: null, signal: 15 });
});

test('the program writes to the descriptors given as its stdout and stderr, and reads /dev/null', async () => {
  const out = join(dir, 'out');
  const fd = openSync(out, 'w');
  try {
    await spawnProgram('/bin/sh', ['-c', 'echo to-out; echo to-err >&2; cat; echo "stdin ended"'], [null, fd, fd]).exited;
  } finally {
    closeSync(fd);
  }
  expect(readFileSync(out, 'utf8')).toBe('to-out\nto-err\nstdin ended\n');
});

test('passed descriptors become 3, 4, ... in order; the program has no other of this process, its signals at their defaults', async () => {
  const a = openSync(join(dir, 'a'), 'w');
  const b = openSync(join(dir, 'b'), 'w');
  // Passed crossed (b to 3, a to 4): no target may overwrite another's source.
  const writer = spawnProgram('/bin/sh', ['-c', 'echo to-3 >&3; echo to-4 >&4'], [null, null, null], [b, a]);
  expect((await writer.exited).code).toBe(0);
  expect(readFileSync(join(dir, 'b'), 'utf8')).toBe('to-3\n');
  expect(readFileSync(join(dir, 'a'), 'utf8')).toBe('to-4\n');
  // Looked at from here while it sleeps: node holds many descriptors (some
  // without close-on-exec, as its stdio) and ignores SIGPIPE.
  const sleeper = spawnProgram('/bin/sleep', ['10'], [null, null, null], [b, a]);
  try {
    expect(readdirSync(`/proc/${sleeper.pid}/fd`).map(Number).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4]);
    expect(readFileSync(`/proc/${sleeper.pid}/status`, 'utf8').match(/^Sig(Ign|Blk):.*$/gm)).toEqual(['SigBlk:\t0000000000000000', 'SigIgn:\t0000000000000000']);
  } finally {
    process.kill(sleeper.pid, 'SIGKILL');
    await sleeper.exited;
    for (const fd of [a, b]) closeSync(fd);
  }
});

test('a program that cannot be started throws, and leaves no process and no descriptor', async () => {
  const before = openFds();
  expect(() => spawnProgram('/no/such/program', [], [null, null, null])).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  expect(() => spawnProgram('no-such-program-anywhere', [], [null, null, null])).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  expect(() => spawnProgram(dir, [], [null, null, null])).toThrow(expect.objectContaining({ code: 'EACCES' }));
  expect(openFds()).toBe(before);
});

test('an ended program is collected (no zombie) and no descriptor of the spawn stays open here', async () => {
  const before = openFds();
  const runs = Array.from({ length: 20 }, () => spawnProgram('/bin/sh', ['-c', 'exit 0'], [null, null, null]));
  await Promise.all(runs.map((r) => r.exited));
  for (const r of runs) expect(exists(r.pid)).toBe(false);
  expect(openFds()).toBe(before);
});

test('a program that outlives a wait keeps this process alive until it ends', async () => {
  const started = Date.now();
  const { exited } = spawnProgram('/bin/sleep', ['0.3'], [null, null, null]);
  expect(await exited).toEqual({ code: 0, signal: null });
  expect(Date.now() - started).toBeGreaterThanOrEqual(250);
});

test('on a kernel without pidfd_open it forks instead, with the same exits and descriptors', async () => {
  expect(await spawnProgram('/bin/sh', ['-c', 'exit 4'], [null, null, null], [], 'fork').exited).toEqual({ code: 4, signal: null });
  expect(await spawnProgram('/bin/sh', ['-c', 'kill -KILL $$'], [null, null, null], [], 'fork').exited).toEqual({ code: null, signal: 9 });
  const a = openSync(join(dir, 'forked'), 'w');
  try {
    expect((await spawnProgram('/bin/sh', ['-c', 'echo to-3 >&3'], [null, null, null], [a], 'fork').exited).code).toBe(0);
  } finally {
    closeSync(a);
  }
  expect(readFileSync(join(dir, 'forked'), 'utf8')).toBe('to-3\n');
});

test("a program's stdout and stderr come through pipes as it writes them, all of them by `ended`; no descriptor stays open here", async () => {
  const before = openFds();
  const got = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  let firstAt = 0;
  const started = Date.now();
  const run = spawnWithOutput('/bin/sh', ['-c', 'echo first; sleep 0.5; head -c 1048576 /dev/zero; echo err >&2; cat; exit 5'], (stream, bytes) => {
    firstAt ||= Date.now();
    got[stream].push(bytes);
  });
  const exit = await run.ended;
  expect(exit).toEqual({ code: 5, signal: null });
  // The first line came while it slept, not with its end.
  expect(firstAt - started).toBeLessThan(400);
  expect(Buffer.concat(got.stdout).length).toBe('first\n'.length + 1048576);
  expect(Buffer.concat(got.stderr).toString()).toBe('err\n');
  expect(exists(run.pid)).toBe(false);
  expect(openFds()).toBe(before);
  // As a forked one does, on a kernel without pidfd_open.
  const forked: Buffer[] = [];
  expect(await spawnWithOutput('/bin/sh', ['-c', 'echo forked; kill -KILL $$'], (_, b) => forked.push(b), 'fork').ended).toEqual({ code: null, signal: 9 });
  expect(Buffer.concat(forked).toString()).toBe('forked\n');
});

test('runUnforked gives the output, and fails naming the command with its stderr, its timeout or a missing program', async () => {
  expect(await runUnforked('/bin/sh', ['-c', 'echo out; echo err >&2'])).toEqual({ stdout: 'out\n', stderr: 'err\n' });
  await expect(runUnforked('/bin/sh', ['-c', 'echo broken >&2; exit 2'])).rejects.toThrow(new CommandError('/bin/sh -c echo broken >&2; exit 2', 2, 'broken\n'));
  const started = Date.now();
  await expect(runUnforked('/bin/sleep', ['10'], { timeoutMs: 200 })).rejects.toThrow('/bin/sleep 10 failed: timed out after 200 ms');
  expect(Date.now() - started).toBeLessThan(5_000);
  await expect(runUnforked('no-such-program-anywhere', [])).rejects.toThrow("'no-such-program-anywhere' is not installed (not found on PATH)");
});

test('run() gives a program its input through a pipe, without forking; one that leaves its input unread still ends', async () => {
  const script = 'line one\n'.repeat(50_000);
  expect((await run('cat', [], { input: script })).stdout).toBe(script);
  expect(await run('/bin/sh', ['-c', 'head -c 5; echo'], { input: script })).toEqual({ stdout: 'line \n', stderr: '' });
  // The path of the commands that need their own environment: a fork, as before.
  expect((await run('/bin/sh', ['-c', 'echo $ONLY_HERE'], { env: { ONLY_HERE: 'yes' } })).stdout).toBe('yes\n');
});
