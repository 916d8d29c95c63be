#!/usr/bin/env node
// Runs jest for the package in the current directory with the Node flags that
// native ES module support needs. Every package's `test` script calls this.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// jest's `exports` map hides bin/, so find the package and join the path.
const jestBin = join(dirname(createRequire(import.meta.url).resolve('jest/package.json')), 'bin/jest.js');
const res = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', jestBin, ...process.argv.slice(2)],
  { stdio: 'inherit' },
);
process.exit(res.status ?? 1);
