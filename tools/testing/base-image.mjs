#!/usr/bin/env node
// The base image's root filesystem tar for tests: built once by mmdebstrap
// into a cache that every test suite and CI run on this machine shares
// (PADDOCK_TEST_CACHE, default /var/tmp/paddock-test-cache), found there
// afterwards. Run as a program (once, before the suites) it prints the tar's
// path on stdout and the build's progress on stderr:
//
//   node tools/testing/base-image.mjs [--force] [--cache-dir DIR]
import { buildBaseRootfs } from '@paddock/runtime';
import { pathToFileURL } from 'node:url';

export function testCacheDir() {
  return process.env.PADDOCK_TEST_CACHE || '/var/tmp/paddock-test-cache';
}

/** Progress as lines on stderr: each new step, and every tenth of a step's way. */
function progressPrinter(write) {
  let last = { message: '', tenth: -1 };
  return (p) => {
    const tenth = p.percent === undefined ? -1 : Math.floor(p.percent / 10);
    const step = p.message.replace(/ \(\d+\/\d+\)$/, '');
    if (step === last.message && tenth === last.tenth) return;
    last = { message: step, tenth };
    write(`base image: ${p.message}${p.percent === undefined ? '' : ` ${Math.floor(p.percent)}%`}\n`);
  };
}

export async function baseImageTar({ cacheDir = testCacheDir(), force = false, quiet = false } = {}) {
  const started = Date.now();
  const res = await buildBaseRootfs({
    cacheDir,
    force,
    onProgress: quiet ? undefined : progressPrinter((s) => process.stderr.write(s)),
  });
  if (!quiet && !res.fromCache) {
    process.stderr.write(`base image: built ${res.tarPath} (${(res.size / 1e6).toFixed(0)} MB) in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
  }
  return res;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  let cacheDir = testCacheDir();
  let force = false;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--force') force = true;
    else if (args[i] === '--cache-dir' && args[i + 1]) cacheDir = args[++i];
    else {
      process.stderr.write(`unknown argument '${args[i]}'\nusage: base-image.mjs [--force] [--cache-dir DIR]\n`);
      process.exit(2);
    }
  }
  try {
    const res = await baseImageTar({ cacheDir, force });
    process.stdout.write(`${res.tarPath}\n`);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
