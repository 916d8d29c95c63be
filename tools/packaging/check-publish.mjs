#!/usr/bin/env node
// Checks, for every public package, what `npm publish` would do, without
// publishing: `npm publish --dry-run` must print no warning (other than the
// one about not being logged in), and the tarball must hold what users need
// and nothing else: package.json, README, the repository's LICENSE, every
// file its `exports`, `main`, `types` and `bin` name, no tests, no build
// caches. Manifests: a repository url, Apache-2.0, caret ranges for the
// workspace's packages and for peers, so that each package can be pinned and
// released on its own. Builds first (turbo, cached). Exit code 1 on any
// problem, each one printed.
//
//   node tools/packaging/check-publish.mjs
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { publicPackages, repoRoot } from './packages.mjs';

const problems = [];
const license = readFileSync(join(repoRoot, 'LICENSE'), 'utf8');
const rootRepo = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).repository?.url;
const names = new Set(publicPackages().map((p) => p.name));

/** Never in a tarball: tests, build caches and test output, workspace configuration. */
const UNWANTED = [/(^|\/)\.tsbuildinfo$/, /^test\//, /(^|\/)__tests__\//, /\.test\.[cm]?[jt]s$/, /^jest\.config\./, /^\.jest-results(\.[a-z0-9-]+)?\.json$/, /^tsconfig.*\.json$/, /^node_modules\//, /^\.turbo\//];

/** Every file path an `exports` map (or `main`/`types`/`bin`) names. */
function namedFiles(manifest) {
  const out = [];
  const walk = (v) => {
    if (typeof v === 'string') out.push(v);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(manifest.exports);
  walk(manifest.bin);
  for (const f of ['main', 'module', 'types']) walk(manifest[f]);
  return out.filter((p) => !p.includes('*')).map((p) => p.replace(/^\.\//, ''));
}

const build = spawnSync('npx', ['turbo', 'run', 'build', ...publicPackages().map((p) => `--filter=${p.name}`), '--output-logs=errors-only'], {
  cwd: repoRoot,
  stdio: 'inherit',
});
if (build.status !== 0) {
  console.error('build failed');
  process.exit(1);
}

for (const { name, dir, manifest } of publicPackages()) {
  const problem = (what) => problems.push(`${name}: ${what}`);
  const res = spawnSync('npm', ['publish', '--dry-run', '--json', '--ignore-scripts', '-w', dir], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (res.status !== 0) {
    problem(`npm publish --dry-run exited ${res.status}:\n${res.stderr}`);
    continue;
  }
  for (const line of res.stderr.split('\n')) {
    // Nobody is logged in where this runs; that one warning is expected.
    if (/^npm (warn|WARN|error|ERR)/.test(line) && !/requires you to be logged in/.test(line)) problem(line);
  }
  const report = JSON.parse(res.stdout);
  const files = (report[name] ?? report).files.map((f) => f.path);
  const has = new Set(files);
  for (const f of ['package.json', 'README.md', 'LICENSE']) if (!has.has(f)) problem(`the tarball has no ${f}`);
  if (readFileSync(join(repoRoot, dir, 'LICENSE'), 'utf8') !== license) problem(`${dir}/LICENSE is not the repository's LICENSE`);
  for (const f of files) if (UNWANTED.some((re) => re.test(f))) problem(`the tarball holds ${f}`);
  for (const f of namedFiles(manifest)) if (!has.has(f)) problem(`package.json names ${f}, which is not in the tarball`);

  if (manifest.license !== 'Apache-2.0') problem(`license is ${manifest.license}, not Apache-2.0`);
  if (!manifest.repository?.url || manifest.repository.url !== rootRepo) problem(`repository.url is ${manifest.repository?.url}, not the root's ${rootRepo}`);
  if (manifest.repository?.directory !== dir) problem(`repository.directory is ${manifest.repository?.directory}, not ${dir}`);
  for (const field of ['dependencies', 'peerDependencies']) {
    for (const [dep, range] of Object.entries(manifest[field] ?? {})) {
      const pinned = !/^[\^~>]/.test(range);
      if (names.has(dep) && pinned) problem(`${field}.${dep} is pinned at ${range}: a caret range lets it be released on its own`);
      if (field === 'peerDependencies' && pinned) problem(`peer ${dep} is pinned at ${range}: apps on a later minor would fail to install`);
    }
  }
  console.log(`${name}: ${files.length} files checked`);
}

if (problems.length > 0) {
  console.error(`\n${problems.length} problem(s):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('every public package would publish cleanly');
