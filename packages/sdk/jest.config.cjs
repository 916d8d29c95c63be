module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'sdk',
  testTimeout: 60000,
};
