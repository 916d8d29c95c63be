// The code-interpreter server against real Jupyter kernels on this host:
// the wire messages, contexts, errors, environment variables, charts and
// interrupts, in every language it runs.
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execute, mainResult, startServer, stdout, type RunningServer } from './server.js';

let srv: RunningServer;
let home: string;

beforeAll(async () => {
  home = realpathSync(mkdtempSync(join(tmpdir(), 'paddock-ci-home-')));
  srv = await startServer({ cwd: home });
}, 90_000);

afterAll(async () => {
  await srv?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

const post = (path: string, body?: unknown) =>
  fetch(`${srv.url}${path}`, { method: 'POST', ...(body === undefined ? {} : { body: JSON.stringify(body) }), headers: { 'content-type': 'application/json' } });

test('a cell answers its execution count and its value as the main result, in the default Python context', async () => {
  const msgs = await execute(srv.url, { code: '1+1' });
  expect(msgs[0]).toEqual({ type: 'number_of_executions', execution_count: expect.any(Number) });
  expect(mainResult(msgs)).toEqual({ type: 'result', is_main_result: true, text: '2' });
  // A string is shown without the quotes of its repr.
  expect(mainResult(await execute(srv.url, { code: '"hello"' }))).toMatchObject({ text: 'hello' });
});

test('state stays between cells; stdout and stderr come in order; an exception is an error line with its traceback', async () => {
  await execute(srv.url, { code: 'counter = 41' });
  const msgs = await execute(srv.url, { code: 'import sys\ncounter += 1\nprint("out", counter)\nprint("err", file=sys.stderr)\n1/0' });
  expect(msgs.filter((m) => m.type !== 'number_of_executions').map((m) => [m.type, m.type === 'error' ? m.name : m.text])).toEqual([
    ['stdout', 'out 42\n'],
    ['stderr', 'err\n'],
    ['error', 'ZeroDivisionError'],
  ]);
  const error = msgs.find((m) => m.type === 'error')!;
  expect(error.value).toBe('division by zero');
  expect(error.traceback).toContain('ZeroDivisionError');
  expect(mainResult(await execute(srv.url, { code: 'counter' }))).toMatchObject({ text: '42' });
});

test('a DataFrame comes as text, HTML and its columns; a matplotlib figure as PNG with its chart data', async () => {
  const frame = mainResult(await execute(srv.url, { code: 'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})' }))!;
  expect(frame.text).toContain('a  b');
  expect(frame.html).toContain('<table');
  expect(frame.data).toEqual({ a: [1, 2], b: ['x', 'y'] });

  const line = await execute(srv.url, {
    code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label="up")\nplt.title("rising")\nplt.xlabel("time (s)")\nplt.show()',
  });
  const figure = line.find((m) => m.type === 'result')!;
  expect(figure.is_main_result).toBe(false);
  expect(Buffer.from(figure.png as string, 'base64').subarray(1, 4).toString()).toBe('PNG');
  expect(figure.chart).toMatchObject({ type: 'line', title: 'rising', x_label: 'time', x_unit: 's', x_scale: 'linear', elements: [{ label: 'up', points: [[1, 4], [2, 5], [3, 6]] }] });

  const bars = (await execute(srv.url, { code: 'plt.bar(["a", "b"], [3, 7], label="sales")\nplt.show()' })).find((m) => m.type === 'result')!;
  expect(bars.chart).toMatchObject({ type: 'bar', elements: [{ label: 'a', value: 3, group: 'sales' }, { label: 'b', value: 7, group: 'sales' }] });

  const pie = (await execute(srv.url, { code: 'plt.pie([1, 3], labels=["one", "three"])\nplt.show()' })).find((m) => m.type === 'result')!;
  expect(pie.chart).toMatchObject({ type: 'pie', elements: [{ label: 'one', angle: 90 }, { label: 'three', angle: 270 }] });
});

test('per-call environment variables are seen by that cell only; a value the kernel had is put back', async () => {
  await execute(srv.url, { code: 'import os; os.environ["KEPT"] = "before"' });
  const code = 'import os; print(os.environ.get("ONCE"), os.environ.get("KEPT"))';
  expect(stdout(await execute(srv.url, { code, env_vars: { ONCE: 'it\'s "quoted"', KEPT: 'during' } }))).toBe('it\'s "quoted" during\n');
  expect(stdout(await execute(srv.url, { code }))).toBe('None before\n');
});

test('a client that goes away interrupts its cell; the context keeps its state and runs the next one', async () => {
  await execute(srv.url, { code: 'survivor = "still here"' });
  const abort = new AbortController();
  const started = Date.now();
  const timer = setTimeout(() => abort.abort(), 1_000);
  await expect(execute(srv.url, { code: 'while True:\n    pass' }, abort.signal)).rejects.toThrow();
  clearTimeout(timer);
  const next = await execute(srv.url, { code: 'survivor' });
  expect(mainResult(next)).toMatchObject({ text: 'still here' });
  expect(Date.now() - started).toBeLessThan(20_000);
});

test('contexts: made with a cwd, listed, restarted (state gone, cwd kept) and removed', async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'paddock-ci-cwd-')));
  try {
    const res = await post('/contexts', { language: 'python', cwd: dir });
    expect(res.status).toBe(200);
    const ctx = (await res.json()) as { id: string; language: string; cwd: string };
    expect(ctx).toEqual({ id: expect.any(String), language: 'python', cwd: dir });
    expect(mainResult(await execute(srv.url, { code: 'import os; os.getcwd()', context_id: ctx.id }))).toMatchObject({ text: dir });
    // The default context is another kernel, in the server's default directory.
    expect(mainResult(await execute(srv.url, { code: 'import os; os.getcwd()' }))).toMatchObject({ text: home });

    const list = (await (await fetch(`${srv.url}/contexts`)).json()) as Array<{ id: string }>;
    expect(list.map((c) => c.id)).toContain(ctx.id);

    await execute(srv.url, { code: 'mine = 1', context_id: ctx.id });
    expect((await post(`/contexts/${ctx.id}/restart`)).status).toBe(204);
    const after = await execute(srv.url, { code: 'import os\nprint(os.getcwd())\nmine', context_id: ctx.id });
    expect(stdout(after)).toBe(`${dir}\n`);
    expect(after.find((m) => m.type === 'error')).toMatchObject({ name: 'NameError' });

    expect((await fetch(`${srv.url}/contexts/${ctx.id}`, { method: 'DELETE' })).status).toBe(204);
    const gone = await post('/execute', { code: '1', context_id: ctx.id });
    expect(gone.status).toBe(404);
    expect(await gone.text()).toBe(`context '${ctx.id}' not found`);
    expect((await fetch(`${srv.url}/contexts/${ctx.id}`, { method: 'DELETE' })).status).toBe(404);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad requests are refused naming what was wrong', async () => {
  const cases: Array<[string, unknown, number, string]> = [
    ['/execute', { code: 1 }, 400, "'code' must be a string"],
    ['/execute', { code: '1', context_id: 'x', language: 'python' }, 400, "give 'context_id' or 'language', not both"],
    ['/execute', { code: '1', language: 'cobol' }, 400, "language 'cobol' is not supported; supported: python, javascript, typescript, bash"],
    ['/execute', { code: '1', env_vars: { 'A-B': 'x' } }, 400, "'A-B' is not an environment variable name"],
    ['/execute', { code: '1', env_vars: { A: 1 } }, 400, "'env_vars' must be an object of strings"],
    ['/contexts', { cwd: 'relative' }, 400, "cwd 'relative' is not an absolute path"],
    ['/contexts', { cwd: '/no/such/dir' }, 400, "cwd '/no/such/dir' is not a directory"],
    ['/contexts', [1], 400, 'the body must be a JSON object'],
  ];
  for (const [path, body, status, message] of cases) {
    const res = await post(path, body);
    expect([path, res.status, await res.text()]).toEqual([path, status, message]);
  }
  const notJson = await fetch(`${srv.url}/execute`, { method: 'POST', body: '{' });
  expect(notJson.status).toBe(400);
  expect(await notJson.text()).toMatch(/^the body is not JSON/);
});

test('JavaScript and TypeScript: globals kept, console output, values, errors, await, and an interrupted endless loop', async () => {
  const js = (code: string, signal?: AbortSignal) => execute(srv.url, { code, language: 'javascript' }, signal);
  const first = await js('let total = 40; console.log("hi"); total + 2');
  expect(stdout(first)).toBe('hi\n');
  expect(mainResult(first)).toMatchObject({ text: '42' });
  expect(mainResult(await js('total * 2'))).toMatchObject({ text: '80' });
  expect(mainResult(await js('({ a: [1, 2] })'))).toMatchObject({ text: '{ a: [ 1, 2 ] }' });
  expect((await js('throw new TypeError("bad input")')).find((m) => m.type === 'error')).toMatchObject({ name: 'TypeError', value: 'bad input' });
  expect(stdout(await js('await new Promise((r) => setTimeout(r, 50)); console.log("waited")'))).toBe('waited\n');
  expect(stdout(await js('console.log(require("node:path").join("a", "b"), process.cwd())'))).toBe(`a/b ${home}\n`);

  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 1_000);
  await expect(js('while (true) {}', abort.signal)).rejects.toThrow();
  clearTimeout(timer);
  expect(mainResult(await js('total'))).toMatchObject({ text: '40' });

  const ts = await execute(srv.url, { code: 'interface P { x: number }\nconst p: P = { x: 3 };\np.x * 3', language: 'ts' });
  expect(mainResult(ts)).toMatchObject({ text: '9' });
});

test('bash: variables and the directory kept, stderr apart, a failing command is an error with its status', async () => {
  const sh = (code: string, env_vars?: Record<string, string>) => execute(srv.url, { code, language: 'bash', ...(env_vars ? { env_vars } : {}) });
  const first = await sh('NAME=paddock; mkdir -p sub && cd sub; echo "hello $NAME"; echo oops >&2');
  expect(first.filter((m) => m.type === 'stdout' || m.type === 'stderr').map((m) => [m.type, m.text])).toEqual([
    ['stdout', 'hello paddock\n'],
    ['stderr', 'oops\n'],
  ]);
  expect(stdout(await sh('echo "$NAME in $(basename "$PWD")"'))).toBe('paddock in sub\n');
  expect((await sh('false')).find((m) => m.type === 'error')).toMatchObject({ name: '', value: '1' });
  expect(stdout(await sh('echo "[$ONLY]"', { ONLY: "a 'b'" }))).toBe("[a 'b']\n");
  expect(stdout(await sh('echo "[$ONLY]"'))).toBe('[]\n');
});

test("a Python context's history is kept in memory (In, Out, _, %history), not written to IPython's database", async () => {
  const ipython = mkdtempSync(join(tmpdir(), 'paddock-ci-ipython-'));
  try {
    const other = await startServer({ env: { IPYTHONDIR: ipython } });
    try {
      await execute(other.url, { code: 'x = 6 * 7' });
      await execute(other.url, { code: 'x' });
      const seen = stdout(await execute(other.url, { code: 'print(_, In[-2], Out[len(In) - 2])\n%history -n' }));
      expect(seen).toMatch(/^42 x 42\n/);
      expect(seen).toContain('x = 6 * 7');
    } finally {
      await other.stop();
    }
    // The profile directory is made; the history file is not.
    expect(existsSync(join(ipython, 'profile_default'))).toBe(true);
    expect(existsSync(join(ipython, 'profile_default', 'history.sqlite'))).toBe(false);
  } finally {
    rmSync(ipython, { recursive: true, force: true });
  }
});

test('stopping the server ends its kernels and removes the files it and they made', async () => {
  // Its own temporary directory: what is left there after the stop is the server's.
  const tmp = mkdtempSync(join(tmpdir(), 'paddock-ci-tmp-'));
  try {
    const other = await startServer({ env: { TMPDIR: tmp } });
    const pid = Number(stdout(await execute(other.url, { code: 'import os; print(os.getpid())' })).trim());
    expect(stdout(await execute(other.url, { code: 'echo bash-ran', language: 'bash' }))).toBe('bash-ran\n');
    expect(readdirSync(tmp)).not.toEqual([]);
    expect(() => process.kill(pid, 0)).not.toThrow();
    await other.stop();
    let running = true;
    for (let i = 0; i < 100 && running; i++) {
      try {
        process.kill(pid, 0);
        await new Promise((r) => setTimeout(r, 100));
      } catch {
        running = false;
      }
    }
    expect(running).toBe(false);
    expect(readdirSync(tmp)).toEqual([]);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
