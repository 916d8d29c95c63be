module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'dashboard',
  testTimeout: 120000,
  // One server, one browser and one sandbox for the whole suite.
  maxWorkers: 1,
};
