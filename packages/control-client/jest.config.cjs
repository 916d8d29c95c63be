module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'control-client',
};
