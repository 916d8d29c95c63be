#!/usr/bin/env node
// Releases the packages that have changesets: `changeset version` (bumps
// versions, writes changelogs, moves the ranges of dependents that the new
// versions leave), then package-lock.json refreshed to the new versions,
// then a build and the publish check, then `changeset publish` (npm publish
// of every package whose version the registry lacks, and git tags).
//
//   node tools/packaging/release.mjs              release from this checkout (needs npm login)
//   node tools/packaging/release.mjs --dry-run    the same up to publishing, in a scratch copy of
//                                                 the checkout; checks the lockfile agrees with
//                                                 the bumped manifests and says what would be published
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { repoRoot } from './packages.mjs';

const dryRun = process.argv.includes('--dry-run');
const bin = (name) => join(repoRoot, 'node_modules/.bin', name);

function run(cwd, cmd, args) {
  console.log(`::: ${cmd} ${args.join(' ')}`);
  const res = spawnSync(cmd, args, { cwd, stdio: 'inherit' });
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${res.status ?? res.signal}`);
}

function versions(root) {
  const out = new Map();
  for (const e of readdirSync(join(root, 'packages'), { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const m = JSON.parse(readFileSync(join(root, 'packages', e.name, 'package.json'), 'utf8'));
    out.set(`packages/${e.name}`, { name: m.name, version: m.version, private: Boolean(m.private) });
  }
  return out;
}

/** Workspace packages whose version in package-lock.json is not their package.json's. */
function staleInLock(root) {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
  return [...versions(root)]
    .filter(([dir, p]) => lock.packages?.[dir]?.version !== p.version)
    .map(([dir, p]) => `${p.name}: ${p.version} in package.json, ${lock.packages?.[dir]?.version} in package-lock.json`);
}

/** The checkout's files (tracked, and new ones not ignored), copied to a scratch directory. */
function scratchCopy() {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-release-'));
  const res = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repoRoot, encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`git ls-files failed: ${res.stderr}`);
  for (const f of res.stdout.split('\0').filter(Boolean)) {
    if (!existsSync(join(repoRoot, f))) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(repoRoot, f), join(dir, f));
  }
  return dir;
}

const root = dryRun ? scratchCopy() : repoRoot;
let code = 0;
try {
  const before = versions(root);
  run(root, bin('changeset'), ['version']);
  // changeset version leaves the lockfile at the old versions; npm ci would then refuse it.
  run(root, 'npm', ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund']);
  const stale = staleInLock(root);
  if (stale.length > 0) throw new Error(`package-lock.json is stale after the refresh:\n${stale.join('\n')}`);
  const left = readdirSync(join(root, '.changeset')).filter((f) => f.endsWith('.md') && f !== 'README.md');
  if (left.length > 0) throw new Error(`changesets left after changeset version: ${left.join(', ')}`);
  const bumped = [...versions(root)].filter(([dir, p]) => !p.private && before.get(dir)?.version !== p.version);
  console.log(bumped.length === 0 ? 'nothing to release' : `to release:\n${bumped.map(([, p]) => `  ${p.name}@${p.version}`).join('\n')}`);
  if (dryRun) {
    console.log('dry run: versions and lockfile checked in a scratch copy; nothing published, the checkout untouched');
  } else if (bumped.length > 0) {
    run(root, 'npx', ['turbo', 'run', 'build', '--output-logs=errors-only']);
    run(root, process.execPath, [join(root, 'tools/packaging/check-publish.mjs')]);
    run(root, bin('changeset'), ['publish']);
    console.log('published; commit the versions, changelogs and lockfile, and push the tags (git push --follow-tags)');
  }
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  code = 1;
} finally {
  if (dryRun) rmSync(root, { recursive: true, force: true });
}
process.exit(code);
