// Shared jest settings for every package: TypeScript through SWC, run as
// native ES modules (packages are ESM and use `import.meta`; jest needs
// `--experimental-vm-modules`, which tools/jest/run.mjs passes), `.js` import
// suffixes mapped back to the TypeScript sources, and workspace packages
// resolved to their sources so tests never run against a stale build.
const path = require('node:path');

const repoRoot = path.resolve(__dirname, '../..');
const packagesDir = path.join(repoRoot, 'packages');

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.(t|j|mj)s$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'es6' },
      },
    ],
  },
  moduleFileExtensions: ['ts', 'js', 'mjs', 'cjs', 'json', 'node'],
  moduleNameMapper: {
    '^@paddock/([a-z-]+)$': `${packagesDir}/$1/src/index.ts`,
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // The official e2b SDK has no `exports` map, so jest would load its
    // CommonJS build, which requires ESM-only dependencies; use its ESM build.
    '^e2b$': path.join(repoRoot, 'node_modules/e2b/dist/index.mjs'),
  },
  // Each package leaves a small JSON summary; tools/ci-summary.mjs adds them up.
  reporters: ['default', path.join(__dirname, 'summary-reporter.cjs')],
  testTimeout: 30000,
};
