#!/usr/bin/env node
// Runs jest for the package in the current directory with the Node flags that
// native ES module support needs. Every package's `test` script calls this.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// jest's `exports` map hides bin/, so find the package and join the path.
const jestBin = join(dirname(createRequire(import.meta.url).resolve('jest/package.json')), 'bin/jest.js');
// Every test's sandboxes share one image store and one built base root
// filesystem (tools/testing/base-image.mjs makes it before the tests run):
// layers never change once unpacked, and unpacking the base for each test's
// data directory would take most of the run.
const cache = process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache';
const env = {
  ...process.env,
  PADDOCK_TEST_CACHE: cache,
  PADDOCK_IMAGES_DIR: process.env.PADDOCK_IMAGES_DIR ?? join(cache, 'layers'),
  PADDOCK_CACHE_DIR: process.env.PADDOCK_CACHE_DIR ?? cache,
};
const res = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', jestBin, ...process.argv.slice(2)],
  { stdio: 'inherit', env },
);
process.exit(res.status ?? 1);
