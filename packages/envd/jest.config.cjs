module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'envd',
  testTimeout: 60000,
};
