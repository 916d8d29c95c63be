#!/usr/bin/env node
// Runs jest for the package in the current directory with the Node flags that
// native ES module support needs. Every package's `test` script calls this.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { auditLog } from '../testing/log-audit.mjs';

// jest's `exports` map hides bin/, so find the package and join the path.
const jestBin = join(dirname(createRequire(import.meta.url).resolve('jest/package.json')), 'bin/jest.js');
// Every test's sandboxes share one image store and one built base root
// filesystem (tools/testing/base-image.mjs makes it before the tests run):
// layers never change once unpacked, and unpacking the base for each test's
// data directory would take most of the run.
const cache = process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache';
// Servers that tests start without a log file of their own (the test
// harnesses give theirs one and read it back) log here, not into jest's
// output; after the run no line may hold an API key.
const logDir = mkdtempSync(join(tmpdir(), 'paddock-test-logs-'));
const logFile = process.env.PADDOCK_LOG_FILE ?? join(logDir, 'server.log');
const env = {
  ...process.env,
  PADDOCK_LOG_FILE: logFile,
  PADDOCK_TEST_CACHE: cache,
  PADDOCK_IMAGES_DIR: process.env.PADDOCK_IMAGES_DIR ?? join(cache, 'layers'),
  PADDOCK_CACHE_DIR: process.env.PADDOCK_CACHE_DIR ?? cache,
};
const res = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', jestBin, ...process.argv.slice(2)],
  { stdio: 'inherit', env },
);
let status = res.status ?? 1;
try {
  auditLog(logFile);
} catch (err) {
  process.stderr.write(`the servers' log: ${err.message}\n`);
  status = status || 1;
}
rmSync(logDir, { recursive: true, force: true });
process.exit(status);
