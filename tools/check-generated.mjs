#!/usr/bin/env node
// Fails, printing the difference, when the committed generated code under
// packages/models/src/gen is not exactly what the contracts generate. It
// generates into a temporary directory and compares, so it never touches the
// working tree and also catches uncommitted hand edits.
//
//   node tools/check-generated.mjs [--gen-dir DIR]   (DIR defaults to the repo's gen dir)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { generate, genDir, repoRoot } from './generate.mjs';

const i = process.argv.indexOf('--gen-dir');
const actual = resolve(i >= 0 ? process.argv[i + 1] : join(repoRoot, genDir));
const scratch = mkdtempSync(join(tmpdir(), 'paddock-gen-'));
let code = 0;
try {
  const expected = await generate(scratch);
  const diff = spawnSync(
    'git',
    ['diff', '--no-index', '--no-color', '--stat', '--patch', expected, actual],
    { encoding: 'utf8' },
  );
  // `buf generate` run by hand (the design's own command) must not take the OpenAPI types with it.
  const env = { ...process.env, PATH: `${join(repoRoot, 'node_modules/.bin')}:${process.env.PATH ?? ''}` };
  const bare = spawnSync('buf', ['generate', '--output', scratch], { cwd: repoRoot, env, encoding: 'utf8' });
  const lost = ['control.gen.ts', 'envd.gen.ts'].filter((f) => !existsSync(join(expected, f)));
  if (bare.status !== 0 || lost.length > 0) {
    console.error(`a bare \`buf generate\` ${bare.status !== 0 ? `failed: ${bare.stderr}` : `deleted ${lost.join(', ')}`}`);
    code = 1;
  }
  if (diff.status === 0) {
    console.log('generated code is up to date');
  } else if (diff.status === 1) {
    console.error(`generated code differs from what the contracts produce (${actual}):`);
    console.error(diff.stdout);
    console.error('run `npm run generate` and commit the result; never edit generated files by hand');
    code = 1;
  } else {
    console.error(`could not compare generated code: ${diff.stderr || diff.error}`);
    code = 2;
  }
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  code = 2;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(code);
