#!/usr/bin/env node
// Adds up the `.jest-results.json` every package's test run leaves behind
// (and the `.jest-results.<tag>.json` of a second run, such as the runtime's
// on runc) and the CI steps recorded in the file given as argument (`<name> ok|failed`
// per line; `npm test` itself is covered by the jest counts), then prints one
// line: `N passed, N failed`. A package with tests but no results file
// counts as a failure. Exits 1 when anything failed.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
let passed = 0;
let failed = 0;
const problems = [];
/** Every test file's time, for the slowest-files lines (CI's time budget is tight). */
const timings = [];

for (const name of readdirSync(join(root, 'packages')).sort()) {
  const pkgFile = join(root, 'packages', name, 'package.json');
  if (!existsSync(pkgFile)) continue;
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'));
  if (!pkg.scripts?.test) continue;
  const resultFile = join(root, 'packages', name, '.jest-results.json');
  if (!existsSync(resultFile)) {
    failed += 1;
    problems.push(`${name}: no test results (the test run did not finish)`);
    continue;
  }
  // The main run's results, then any tagged run's, labelled `name (tag)`.
  const runs = [{ label: name, file: resultFile }];
  for (const f of readdirSync(join(root, 'packages', name)).sort()) {
    const tag = /^\.jest-results\.([a-z0-9-]+)\.json$/.exec(f)?.[1];
    if (tag) runs.push({ label: `${name} (${tag})`, file: join(root, 'packages', name, f) });
  }
  for (const { label, file } of runs) {
    const r = JSON.parse(readFileSync(file, 'utf8'));
    for (const f of r.files ?? []) timings.push({ file: `${label}/${f.file}`, ms: f.ms });
    passed += r.passed;
    failed += r.failed;
    // A suite that failed to load, or an interrupted run, has no failed test
    // but is a failure.
    const broken = Math.max(r.suitesBroken, r.failed === 0 ? r.suitesFailed : 0, r.interrupted ? 1 : 0);
    failed += broken;
    if (r.failed || broken) problems.push(`${label}: ${r.failed} tests failed, ${broken} suites failed to run`);
    for (const f of r.failures ?? []) {
      problems.push(`  ${label}/${f.file}: ${f.test}\n${f.message.replace(/^/gm, '      ')}`);
    }
  }
}

const stepsFile = process.argv[2];
if (stepsFile && existsSync(stepsFile)) {
  for (const line of readFileSync(stepsFile, 'utf8').split('\n').filter(Boolean)) {
    const ok = line.endsWith(' ok');
    const step = line.replace(/ (ok|failed)$/, '');
    if (step === 'npm test') {
      // Counted through the packages' results; a failure with no failing
      // test (a build error, say) still has to show.
      if (!ok && failed === 0) {
        failed += 1;
        problems.push('npm test failed before any test failed (build or typecheck)');
      }
      continue;
    }
    if (ok) passed += 1;
    else {
      failed += 1;
      problems.push(`${step} failed`);
    }
  }
}

if (timings.length) {
  const total = timings.reduce((sum, t) => sum + t.ms, 0);
  console.log(`test files: ${timings.length}, ${(total / 60000).toFixed(1)} min in all; the slowest:`);
  for (const t of timings.sort((a, b) => b.ms - a.ms).slice(0, 12)) console.log(`  ${(t.ms / 1000).toFixed(0).padStart(4)} s  ${t.file}`);
}
for (const p of problems) console.log(`- ${p}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
