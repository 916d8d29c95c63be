const path = require('node:path');
const preset = require('../../tools/jest/preset.cjs');

module.exports = {
  ...preset,
  moduleNameMapper: {
    ...preset.moduleNameMapper,
    // Like e2b, the code-interpreter SDK has no `exports` map: its ESM build.
    '^@e2b/code-interpreter$': path.resolve(__dirname, '../../node_modules/@e2b/code-interpreter/dist/index.mjs'),
  },
  displayName: 'compat',
  testTimeout: 120000,
  maxWorkers: 1,
};
