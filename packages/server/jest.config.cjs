module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'server',
  testTimeout: 120000,
  // Tests start real servers with real sandboxes: one file at a time.
  maxWorkers: 1,
};
