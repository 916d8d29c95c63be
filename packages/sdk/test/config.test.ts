// Where the SDK looks for the service: options, then environment variables, then defaults.
import { DEFAULT_API_URL, DEFAULT_DOMAIN, DEFAULT_SANDBOX_URL, envdUrl, resolveConfig } from '../src/config.js';
import { InvalidArgumentError } from '../src/errors.js';

const env = {
  PADDOCK_API_URL: 'http://api.from-env:3000',
  PADDOCK_API_KEY: 'key-from-env',
  PADDOCK_DOMAIN: 'from-env.example',
  PADDOCK_SANDBOX_URL: 'http://sandboxes.from-env:3001',
};

test('with nothing set: a local `paddock start`, envd through the shared sandbox URL', () => {
  const config = resolveConfig({}, {});
  expect(config).toEqual({
    apiUrl: DEFAULT_API_URL,
    apiKey: undefined,
    domain: DEFAULT_DOMAIN,
    sandboxUrl: DEFAULT_SANDBOX_URL,
    requestTimeoutMs: 60_000,
    retries: 3,
    logger: undefined,
    debug: false,
    headers: {},
    apiHeaders: {},
  });
  expect([DEFAULT_API_URL, DEFAULT_SANDBOX_URL, DEFAULT_DOMAIN]).toEqual(['http://127.0.0.1:3000', 'http://127.0.0.1:3001', 'localhost:3001']);
});

test('environment variables fill what options leave out', () => {
  expect(resolveConfig({}, env)).toMatchObject({
    apiUrl: 'http://api.from-env:3000',
    apiKey: 'key-from-env',
    domain: 'from-env.example',
    sandboxUrl: 'http://sandboxes.from-env:3001',
  });
});

test('options win over environment variables', () => {
  const config = resolveConfig(
    {
      apiUrl: 'http://api.opt',
      apiKey: 'key-opt',
      domain: 'opt.example',
      sandboxUrl: 'http://sbx.opt',
      requestTimeoutMs: 5,
      retries: 0,
      logger: console,
      debug: false,
      headers: { 'X-A': '1' },
      apiHeaders: { 'X-B': '2' },
    },
    { ...env, PADDOCK_DEBUG: 'true' },
  );
  expect(config).toEqual({
    apiUrl: 'http://api.opt',
    apiKey: 'key-opt',
    domain: 'opt.example',
    sandboxUrl: 'http://sbx.opt',
    requestTimeoutMs: 5,
    retries: 0,
    logger: console,
    debug: false,
    headers: { 'X-A': '1' },
    // Headers of every request go to the control API too.
    apiHeaders: { 'X-A': '1', 'X-B': '2' },
  });
});

test('debug: from PADDOCK_DEBUG; its envd is localhost:49983 unless sandboxUrl says otherwise', () => {
  expect(resolveConfig({}, { PADDOCK_DEBUG: 'true' })).toMatchObject({ debug: true, sandboxUrl: 'http://localhost:49983' });
  expect(resolveConfig({ debug: true, sandboxUrl: 'http://envd:1' }, {})).toMatchObject({ debug: true, sandboxUrl: 'http://envd:1' });
  expect(resolveConfig({}, { PADDOCK_DEBUG: 'no' }).debug).toBe(false);
});

test.each([
  ['requestTimeoutMs', { requestTimeoutMs: -1 }, /^requestTimeoutMs must be a whole number of milliseconds, 0 or more; got -1$/],
  ['requestTimeoutMs', { requestTimeoutMs: 1.5 }, /got 1.5$/],
  ['retries', { retries: -2 }, /^retries must be a whole number, 0 or more; got -2$/],
  ['retries', { retries: Number.NaN }, /got NaN$/],
])('a bad %s is refused naming it', (_name, opts, message) => {
  expect(() => resolveConfig(opts, {})).toThrow(InvalidArgumentError);
  expect(() => resolveConfig(opts, {})).toThrow(message);
});

test('an empty variable counts as unset', () => {
  expect(resolveConfig({}, { PADDOCK_API_KEY: '', PADDOCK_API_URL: '' })).toMatchObject({ apiKey: undefined, apiUrl: DEFAULT_API_URL });
});

describe('shared sandbox URL or per-sandbox hosts', () => {
  test('a configured domain alone means per-sandbox hosts', () => {
    expect(resolveConfig({}, { PADDOCK_DOMAIN: 'sbx.example.com' }).sandboxUrl).toBeUndefined();
    expect(resolveConfig({ domain: 'sbx.example.com' }, {}).sandboxUrl).toBeUndefined();
  });

  test('a domain option beats an inherited PADDOCK_SANDBOX_URL, a sandboxUrl option beats everything', () => {
    expect(resolveConfig({ domain: 'sbx.example.com' }, env).sandboxUrl).toBeUndefined();
    expect(resolveConfig({ sandboxUrl: 'http://x:1', domain: 'sbx.example.com' }, env).sandboxUrl).toBe('http://x:1');
    // Both from the environment: the explicit URL wins, the domain still names hosts.
    expect(resolveConfig({}, env)).toMatchObject({ sandboxUrl: env.PADDOCK_SANDBOX_URL, domain: env.PADDOCK_DOMAIN });
  });

  test('envd URL: the shared URL as is, or port 49983 of the sandbox host (https unless under localhost)', () => {
    expect(envdUrl(resolveConfig({}, {}), 'sbx1', 'ignored.example')).toBe(DEFAULT_SANDBOX_URL);
    const perHost = resolveConfig({ domain: 'sbx.example.com' }, {});
    expect(envdUrl(perHost, 'sbx1', 'sbx.example.com')).toBe('https://49983-sbx1.sbx.example.com');
    expect(envdUrl(perHost, 'sbx1', 'localhost:3001')).toBe('http://49983-sbx1.localhost:3001');
    expect(envdUrl(perHost, 'sbx1', 'paddock.localhost')).toBe('http://49983-sbx1.paddock.localhost');
  });
});
