module.exports = {
  ...require('../../tools/jest/preset.cjs'),
  displayName: 'protocol',
};
