module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'code-interpreter',
  testTimeout: 60000,
  maxWorkers: 1,
};
