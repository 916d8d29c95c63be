module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'cli',
  testTimeout: 180000,
  maxWorkers: 1,
};
