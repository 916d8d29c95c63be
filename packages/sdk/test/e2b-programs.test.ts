// The README's promise that switching from e2b is changing the import, as a
// type check: each program in e2b-programs/ is written against `e2b`, and
// must compile (tsc --strict) against `e2b` as it is and against
// `@paddock/sdk` (its built types, as users get them) with only the import
// changed.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');
const programs = join(import.meta.dirname, 'e2b-programs');
const tsc = join(root, 'node_modules/typescript/bin/tsc');
let scratch: string;

beforeAll(() => {
  // Under the workspace, so that both packages resolve from its node_modules as an app's would.
  const cache = join(root, 'node_modules/.cache');
  mkdirSync(cache, { recursive: true });
  scratch = mkdtempSync(join(cache, 'sdk-e2b-programs-'));
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const sources = readdirSync(programs).filter((f) => f.endsWith('.ts'));

/** The programs with `from 'e2b'` turned into `from '<target>'`, in a directory of their own, and tsc's verdict on them. */
async function compile(
  name: string,
  target: string,
  files: Record<string, string>,
  resolution: 'nodenext' | 'bundler' = 'nodenext',
): Promise<{ ok: boolean; output: string }> {
  const dir = join(scratch, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'ES2022',
        lib: ['ES2023', 'DOM'],
        module: resolution === 'bundler' ? 'ESNext' : 'NodeNext',
        moduleResolution: resolution,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
        skipLibCheck: true,
      },
      include: ['*.ts'],
    }),
  );
  for (const [name, text] of Object.entries(files)) {
    const rewritten = text.replace(/from 'e2b'/g, `from '${target}'`);
    writeFileSync(join(dir, name), rewritten);
  }
  try {
    const { stdout } = await run(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { cwd: dir });
    return { ok: true, output: stdout };
  } catch (err) {
    return { ok: false, output: String((err as { stdout?: string }).stdout ?? err) };
  }
}

const programTexts = Object.fromEntries(sources.map((f) => [f, readFileSync(join(programs, f), 'utf8')]));

test('there are programs, each importing e2b', () => {
  expect(sources.length).toBeGreaterThanOrEqual(5);
  for (const text of Object.values(programTexts)) expect(text).toMatch(/from 'e2b';/);
});

const targets = ['e2b', '@paddock/sdk'];
const dirName = (...parts: string[]) => parts.join('-').replace(/[@/]/g, '_');

test.each(targets)('every program compiles against %s, under NodeNext and bundler resolution', async (target) => {
  for (const resolution of ['nodenext', 'bundler'] as const) {
    const { ok, output } = await compile(dirName(target, resolution), target, programTexts, resolution);
    expect({ resolution, output }).toEqual({ resolution, output: '' });
    expect(ok).toBe(true);
  }
}, 240_000);

// e2b's types are CommonJS-flavoured (no `exports` map), so under NodeNext an
// ES module's default import of it is the module object; its README's
// `import Sandbox from 'e2b'` compiles under bundler resolution, checked there.
test.each(targets)('the default export is Sandbox in %s (bundler resolution)', async (target) => {
  const program = {
    'default-export.ts': "import Sandbox from 'e2b';\nexport async function main(): Promise<string> {\n  const sbx = await Sandbox.create('base');\n  return sbx.sandboxId;\n}\n",
  };
  const { ok, output } = await compile(dirName('default', target), target, program, 'bundler');
  expect(output).toBe('');
  expect(ok).toBe(true);
}, 120_000);

test('the check can fail: a program using what neither has is refused against both', async () => {
  const wrong = { 'wrong.ts': "import { Sandbox } from 'e2b';\nexport const x = (s: Sandbox) => s.files.noSuchMethod();\n" };
  for (const target of ['e2b', '@paddock/sdk']) {
    const { ok, output } = await compile(dirName('wrong', target), target, wrong);
    expect(ok).toBe(false);
    expect(output).toMatch(/wrong\.ts\(2,\d+\): error TS2339: Property 'noSuchMethod' does not exist/);
  }
  // And what e2b has and the SDK has not (volumes: the server has none) tells the two apart.
  const volumes = { 'volumes.ts': "import { Volume } from 'e2b';\nexport const v = Volume;\n" };
  expect((await compile('volumes-e2b', 'e2b', volumes)).ok).toBe(true);
  const paddock = await compile('volumes-paddock', '@paddock/sdk', volumes);
  expect(paddock.output).toMatch(/volumes\.ts\(1,10\): error TS\d+: Module '"@paddock\/sdk"' has no exported member 'Volume'/);
}, 180_000);
