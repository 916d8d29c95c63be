module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'compat',
  testTimeout: 120000,
  maxWorkers: 1,
};
