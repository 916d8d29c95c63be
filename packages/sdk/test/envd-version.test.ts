// Which envd versions the SDK accepts, and for which features.
import { atLeast, requireEnvd } from '../src/envd-version.js';
import { TemplateError } from '../src/index.js';

test.each([
  ['0.7.0', '0.4.0', true],
  ['0.4.0', '0.4.0', true],
  ['0.3.9', '0.4.0', false],
  ['1.0.0', '0.9.9', true],
  ['0.10.0', '0.9.0', true],
  ['0.4.0-rc.1', '0.4.0', false],
  ['0.4.0+paddock', '0.4.0', true],
  ['v0.6.4', '0.6.4', true],
  ['dev-build', '0.4.0', true],
])('%s is at least %s: %s', (version, minimum, expected) => {
  expect(atLeast(version, minimum)).toBe(expected);
});

test('requireEnvd names the feature and both versions', () => {
  expect(() => requireEnvd('0.5.0', '0.5.2', 'closeStdin')).toThrow(TemplateError);
  expect(() => requireEnvd('0.5.0', '0.5.2', 'closeStdin')).toThrow(/closeStdin needs envd 0\.5\.2 or newer.*envd 0\.5\.0/);
  expect(() => requireEnvd('0.7.0', '0.5.2', 'closeStdin')).not.toThrow();
});
