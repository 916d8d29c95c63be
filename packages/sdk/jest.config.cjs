module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'sdk',
  testTimeout: 60000,
  // The e2e suite runs a real server with containers: one file at a time.
  maxWorkers: 1,
};
