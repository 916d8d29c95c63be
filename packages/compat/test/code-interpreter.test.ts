// The official @e2b/code-interpreter SDK, unchanged, against Paddock: its
// default template code-interpreter-v1 built from the repository's
// definition by `paddock template build`, then runCode in every way a user
// calls it. The build's steps are kept between runs on this host
// (tools/testing/code-interpreter.mjs); the first build takes minutes.
import { Sandbox, type Context, type OutputMessage, type Result } from '@e2b/code-interpreter';
import { NotFoundError } from 'e2b';
import { isWarmPool } from '@paddock/runtime';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCodeInterpreter, codeInterpreterHome } from '../../../tools/testing/code-interpreter.mjs';
import { API_KEY, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
let sbx: Sandbox;

beforeAll(async () => {
  const { home } = codeInterpreterHome();
  // A pool of one, of the code interpreter only: the first create takes it.
  c = await startForE2b({ home, warmPoolSize: 1, warmPoolTemplates: ['code-interpreter-v1'] });
  const started = Date.now();
  // Step lines only: enough to follow a long first build in the test output.
  await buildCodeInterpreter({ apiUrl: c.server.apiUrl, apiKey: API_KEY, onLine: (l) => /^(\[\d+\/\d+\]|CACHED|built)/.test(l) && process.stderr.write(`code-interpreter-v1: ${l}\n`) });
  process.stderr.write(`code-interpreter-v1: built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  await pool().poolReady();
  pooledAtStart = Object.values(pool().pooled()).flat();
  sbx = await Sandbox.create();
  // The other sandboxes of these tests start cold: a pool refilling beside them would only slow them.
  await pool().setPooledTemplates([]);
}, 1_500_000);

let pooledAtStart: string[] = [];
const pool = () => {
  const runtime = c.server.runtime;
  if (!isWarmPool(runtime)) throw new Error('the server runs a runtime without a warm pool');
  return runtime;
};

test("a create takes a sandbox from the warm pool, its Jupyter server started and ready: the first runCode runs at once", async () => {
  expect(pooledAtStart).toEqual([sbx.sandboxId]);
  const first = await sbx.runCode('import os; os.getpid()');
  expect(first.text).toMatch(/^\d+$/);
  expect(first.error).toBeUndefined();
});

afterAll(async () => {
  await sbx?.kill();
  await c?.teardown();
});

test("Sandbox.create() starts the SDK's default template; runCode('1+1') answers '2' as the main result", async () => {
  const execution = await sbx.runCode('1+1');
  expect(execution.text).toBe('2');
  expect(execution.results).toHaveLength(1);
  expect(execution.results[0]!.isMainResult).toBe(true);
  expect(execution.error).toBeUndefined();
  expect(execution.executionCount).toEqual(expect.any(Number));
});

test('state stays between calls of the default context', async () => {
  await sbx.runCode('kept = 5');
  expect((await sbx.runCode('kept * 2')).text).toBe('10');
});

test('onStdout, onStderr and onResult are called as the cell runs; the execution keeps the same', async () => {
  const out: OutputMessage[] = [];
  const err: OutputMessage[] = [];
  const results: Result[] = [];
  const execution = await sbx.runCode('import sys\nfrom IPython.display import display\nprint("to stdout")\nprint("to stderr", file=sys.stderr)\ndisplay("shown")\n7', {
    onStdout: (m) => void out.push(m),
    onStderr: (m) => void err.push(m),
    onResult: (r) => void results.push(r),
  });
  expect(out.map((m) => m.line)).toEqual(['to stdout\n']);
  expect(err.map((m) => [m.line, m.error])).toEqual([['to stderr\n', true]]);
  expect(results.map((r) => [r.text, r.isMainResult])).toEqual([
    ['shown', false],
    ['7', true],
  ]);
  expect(execution.logs).toEqual({ stdout: ['to stdout\n'], stderr: ['to stderr\n'] });
});

test('1/0 is an ExecutionError: ZeroDivisionError, its value and traceback; onError hears it', async () => {
  const errors: unknown[] = [];
  const execution = await sbx.runCode('1/0', { onError: (e) => void errors.push(e) });
  expect(execution.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' });
  expect(execution.error!.traceback).toContain('ZeroDivisionError');
  expect(errors).toEqual([execution.error]);
});

test('a matplotlib figure comes back as PNG with its chart; a DataFrame as HTML, text and data', async () => {
  const plot = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 8], label="growth")\nplt.title("Growth")\nplt.show()');
  const figure = plot.results[0]!;
  expect(Buffer.from(figure.png!, 'base64').subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  expect(figure.chart).toMatchObject({ type: 'line', title: 'Growth', elements: [{ label: 'growth', points: [[1, 2], [2, 4], [3, 8]] }] });

  const frame = (await sbx.runCode('import pandas as pd\npd.DataFrame({"city": ["Oslo", "Lima"], "people": [709000, 9750000]})')).results[0]!;
  expect(frame.html).toContain('<table');
  expect(frame.html).toContain('Lima');
  expect(frame.text).toContain('people');
  expect(frame.data).toEqual({ city: ['Oslo', 'Lima'], people: [709000, 9750000] });
  expect(frame.formats()).toEqual(expect.arrayContaining(['html', 'data']));
});

test("per-call envs are the cell's only; the next call does not see them", async () => {
  const code = 'import os\nprint(os.environ.get("PER_CALL"))';
  expect((await sbx.runCode(code, { envs: { PER_CALL: 'only now' } })).logs.stdout).toEqual(['only now\n']);
  expect((await sbx.runCode(code)).logs.stdout).toEqual(['None\n']);
});

test('contexts: created with a cwd, listed, kept apart from the default, restarted and removed', async () => {
  const ctx: Context = await sbx.createCodeContext({ cwd: '/tmp' });
  expect(ctx).toMatchObject({ id: expect.any(String), language: 'python', cwd: '/tmp' });
  expect((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text).toBe('/tmp');
  expect((await sbx.runCode('import os; os.getcwd()')).text).toBe('/home/user');
  expect((await sbx.runCode('kept', { context: ctx })).error?.name).toBe('NameError');
  expect((await sbx.listCodeContexts()).map((x) => x.id)).toContain(ctx.id);

  await sbx.runCode('mine = 1', { context: ctx });
  await sbx.restartCodeContext(ctx);
  expect((await sbx.runCode('mine', { context: ctx })).error?.name).toBe('NameError');
  expect((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text).toBe('/tmp');

  await sbx.removeCodeContext(ctx.id);
  expect((await sbx.listCodeContexts()).map((x) => x.id)).not.toContain(ctx.id);
  await expect(sbx.runCode('1', { context: ctx })).rejects.toThrow(NotFoundError);
});

test('a timeout interrupts an endless loop; the context still runs code and keeps its state', async () => {
  // The SDK makes its abort a TimeoutError by `instanceof Error`, which a DOMException of another realm (jest's) fails.
  await expect(sbx.runCode('while True:\n    pass', { timeoutMs: 2_000 })).rejects.toMatchObject({ name: expect.stringMatching(/^(TimeoutError|AbortError)$/) });
  expect((await sbx.runCode('kept')).text).toBe('5');
});

test('JavaScript, TypeScript and bash cells, each with state of its own', async () => {
  expect((await sbx.runCode('const base = 20; base * 2', { language: 'javascript' })).text).toBe('40');
  expect((await sbx.runCode('console.log(base + 1)', { language: 'js' })).logs.stdout).toEqual(['21\n']);
  expect((await sbx.runCode('const n: number = 6;\nn * 7', { language: 'typescript' })).text).toBe('42');
  const bash = await sbx.runCode('WHO=$(whoami); echo "$WHO in $PWD"', { language: 'bash' });
  expect(bash.logs.stdout).toEqual(['user in /home/user\n']);
  expect((await sbx.runCode('echo "$WHO again"', { language: 'bash' })).logs.stdout).toEqual(['user again\n']);
  expect((await sbx.runCode('ls /no-such-dir', { language: 'bash' })).error).toMatchObject({ value: '2' });
});

test("two sandboxes do not share state; a sandbox's envs reach its kernels", async () => {
  const other = await Sandbox.create({ envs: { FROM_CREATE: 'set at create' } });
  try {
    expect((await other.runCode('kept')).error?.name).toBe('NameError');
    expect((await other.runCode('import os; os.environ.get("FROM_CREATE")')).text).toBe('set at create');
    await other.runCode('kept = "other"');
    expect((await sbx.runCode('kept')).text).toBe('5');
  } finally {
    await other.kill();
  }
});

test("the README's code-interpreter quickstart runs as written", async () => {
  const repo = fileURLToPath(new URL('../../..', import.meta.url));
  const m = /<!-- quickstart:code-interpreter -->\n```js\n([\s\S]*?)```/.exec(readFileSync(join(repo, 'README.md'), 'utf8'));
  if (!m) throw new Error('README has no quickstart:code-interpreter block');
  // Saved in the repository, as the README says, so that the import resolves.
  const file = join(repo, `quickstart-test-code-interpreter-${process.pid}.mjs`);
  writeFileSync(file, m[1]!);
  try {
    // Not spawnSync: the server runs in this process and must answer meanwhile.
    const res = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, [file], { env: process.env, encoding: 'utf8', timeout: 120_000, cwd: repo }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
      ),
    );
    expect([res.code, res.stderr, res.stdout]).toEqual([0, '', '6\n']);
  } finally {
    rmSync(file, { force: true });
  }
});
