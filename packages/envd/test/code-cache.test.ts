// How envd starts: the launcher (src/launcher.ts, main.cjs) hands V8
// the code cache the build made for the bundle, and says in the `ready`
// line whether V8 took it. A cache that does not fit must cost only time.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { envdMain, envdNodeFlags } from '../src/index.js';
import { processes, startEnvd } from './harness.js';

type Ready = { codeCache?: string };

function readyLine(logs: string[]): Ready {
  const line = logs.find((l) => l.includes('"msg":"ready"'));
  if (!line) throw new Error(`no ready line in:\n${logs.join('\n')}`);
  return JSON.parse(line) as Ready;
}

/** Starts the envd at `main`, checks that it serves (a command runs to its end), and gives its ready line and logs. */
async function startAndServe(main?: string): Promise<{ ready: Ready; logs: string[] }> {
  const envd = await startEnvd({ main });
  try {
    const health = await fetch(`${envd.url}/health`);
    expect(health.status).toBe(204);
    let stdout = '';
    for await (const res of processes(envd).start({ process: { cmd: '/bin/echo', args: ['served'], envs: {} }, stdin: false })) {
      const e = res.event?.event;
      if (e?.case === 'data' && e.value.output.case === 'stdout') stdout += Buffer.from(e.value.output.value).toString();
    }
    expect(stdout).toBe('served\n');
    return { ready: readyLine(envd.logs), logs: [...envd.logs] };
  } finally {
    await envd.stop();
  }
}

/** The bundle's directory in the build, and its entry point's name there. */
const bundleDir = dirname(envdMain);
const envdEntry = basename(envdMain);

const cacheFile = (dist: string) => join(dist, 'envd.cjs.cache');

/** Runs the launcher at `dist` with `args`, under `flags` and no others (none from NODE_OPTIONS, as the build). */
const launcher = (dist: string, args: string[], flags: readonly string[] = envdNodeFlags) => {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  return spawnSync(process.execPath, [...flags, join(dist, envdEntry), ...args], { encoding: 'utf8', env });
};

test('the built envd starts with the code cache its build made', async () => {
  const { ready, logs } = await startAndServe();
  expect(ready.codeCache).toBe('accepted');
  expect(logs.some((l) => l.includes('"level":"warn"'))).toBe(false);
}, 30_000);

test("the build's cache holds more than the bundle's load: what envd ran for the requests the build sent it", () => {
  const dist = mkdtempSync(join(tmpdir(), 'envd-code-cache-'));
  try {
    const made = launcher(bundleDir, ['--write-code-cache', cacheFile(dist)]);
    expect(made.status).toBe(0);
    // A cache of the load alone is about two thirds the size; 10% is far from both.
    expect(readFileSync(cacheFile(bundleDir)).length).toBeGreaterThan(readFileSync(cacheFile(dist)).length * 1.1);
  } finally {
    rmSync(dist, { recursive: true, force: true });
  }
});

describe('a copy of the build', () => {
  let dist: string;
  beforeEach(() => {
    dist = mkdtempSync(join(tmpdir(), 'envd-code-cache-'));
    cpSync(bundleDir, dist, { recursive: true });
  });
  afterEach(() => rmSync(dist, { recursive: true, force: true }));

  test('without its cache, compiles the bundle and serves', async () => {
    rmSync(cacheFile(dist));
    const { ready } = await startAndServe(join(dist, envdEntry));
    expect(ready.codeCache).toBe('none');
  }, 30_000);

  test('with a cache made under other node options, V8 refuses it; envd says so and serves', async () => {
    const made = launcher(dist, ['--write-code-cache', cacheFile(dist)], [...envdNodeFlags, '--max-old-space-size=96']);
    expect(made.status).toBe(0);
    const { ready, logs } = await startAndServe(join(dist, envdEntry));
    expect(ready.codeCache).toBe('rejected');
    expect(logs.find((l) => l.includes('"level":"warn"'))).toContain('refused the code cache');
  }, 30_000);

  test('with a cache of another bundle, or of none, V8 refuses it and envd serves', async () => {
    // The same bundle with one more line: the cache no longer fits its source.
    appendFileSync(join(dist, 'envd.cjs'), '// changed after the cache was made\n');
    expect((await startAndServe(join(dist, envdEntry))).ready.codeCache).toBe('rejected');
    writeFileSync(cacheFile(dist), Buffer.alloc(readFileSync(cacheFile(bundleDir)).length, 0x5a));
    expect((await startAndServe(join(dist, envdEntry))).ready.codeCache).toBe('rejected');
  }, 30_000);

  test('with a cache file it cannot read, envd says why and serves', async () => {
    rmSync(cacheFile(dist));
    mkdirSync(cacheFile(dist));
    const { ready, logs } = await startAndServe(join(dist, envdEntry));
    expect(ready.codeCache).toBe('unreadable');
    expect(logs.find((l) => l.includes('"level":"warn"'))).toContain('EISDIR');
  }, 30_000);

  test('--write-code-cache makes the cache the next start takes, and nothing else', async () => {
    rmSync(cacheFile(dist));
    const made = launcher(dist, ['--write-code-cache', cacheFile(dist)]);
    expect(made.status).toBe(0);
    expect(made.stdout + made.stderr).toBe('');
    expect((await startAndServe(join(dist, envdEntry))).ready.codeCache).toBe('accepted');
  }, 30_000);

  test('--write-code-cache with envd options serves with them until its input ends, then writes a cache of what ran', async () => {
    const loadOnly = launcher(dist, ['--write-code-cache', join(dist, 'load-only.cache')]);
    expect(loadOnly.status).toBe(0);
    rmSync(cacheFile(dist));
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const maker = spawn(process.execPath, [...envdNodeFlags, join(dist, envdEntry), '--write-code-cache', cacheFile(dist), '--port', '0', '--access-token', 'maker'], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env,
    });
    const exited = new Promise<number | null>((resolve) => maker.once('exit', resolve));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        createInterface({ input: maker.stderr! }).on('line', (line) => {
          if (line.includes('"msg":"ready"')) resolve((JSON.parse(line) as { port: number }).port);
        });
        void exited.then((code) => reject(new Error(`the cache maker exited with ${code} before it was ready`)));
      });
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(204);
      // No cache yet: it is written once the input ends.
      expect(existsSync(cacheFile(dist))).toBe(false);
    } finally {
      maker.stdin!.end();
    }
    expect(await exited).toBe(0);
    expect(readFileSync(cacheFile(dist)).length).toBeGreaterThan(readFileSync(join(dist, 'load-only.cache')).length);
    expect((await startAndServe(join(dist, envdEntry))).ready.codeCache).toBe('accepted');
  }, 30_000);

  test('--write-code-cache without a file exits 2 and says what is missing', () => {
    const run = launcher(dist, ['--write-code-cache']);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('--write-code-cache needs the file to write');
  });
});
