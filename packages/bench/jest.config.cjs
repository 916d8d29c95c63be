module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'bench',
  testTimeout: 180000,
  maxWorkers: 1,
};
