module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'runtime',
  testTimeout: 120000,
  // Sandboxes are real containers: one test file at a time keeps the host calm.
  maxWorkers: 1,
};
