// What the clients throw becomes one of the SDK's classes, with the cause kept.
import { Code, ConnectError } from '@connectrpc/connect';
import { ControlApiError, type ControlErrorKind } from '@paddock/control-client';
import { EnvdArgumentError, EnvdHttpError, type EnvdErrorKind } from '@paddock/envd-client';
import { fromControlError, fromEnvdHttpError, fromRpcError } from '../src/error-mapping.js';
import {
  AuthenticationError,
  BuildError,
  CommandExitError,
  ConnectionError,
  FileNotFoundError,
  FileUploadError,
  GitAuthError,
  GitUpstreamError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  TemplateError,
  TimeoutError,
} from '../src/index.js';

type ErrorClass = new (...args: never[]) => SandboxError;

function controlError(kind: ControlErrorKind, status?: number, code?: number): ControlApiError {
  return new ControlApiError(`GET /sandboxes/sbx1 failed with ${status}: nope`, {
    kind,
    method: 'GET',
    path: '/sandboxes/sbx1',
    status,
    code,
    serverMessage: 'nope',
  });
}

function envdError(kind: EnvdErrorKind, status?: number): EnvdHttpError {
  return new EnvdHttpError(`GET /files failed with ${status}: nope`, { kind, method: 'GET', path: '/files', status });
}

describe('the hierarchy', () => {
  test.each<[ErrorClass, ErrorClass[]]>([
    [TimeoutError, [SandboxError]],
    [InvalidArgumentError, [SandboxError]],
    [NotEnoughSpaceError, [SandboxError]],
    [NotFoundError, [SandboxError]],
    [FileNotFoundError, [NotFoundError, SandboxError]],
    [SandboxNotFoundError, [NotFoundError, SandboxError]],
    [AuthenticationError, [SandboxError]],
    [RateLimitError, [SandboxError]],
    [TemplateError, [SandboxError]],
    [ConnectionError, [SandboxError]],
    [GitAuthError, [AuthenticationError, SandboxError]],
    [GitUpstreamError, [SandboxError]],
    [BuildError, [SandboxError]],
    [FileUploadError, [BuildError, SandboxError]],
  ])('%p is an Error and each of its bases, and names itself', (Class, bases) => {
    const cause = new Error('underneath');
    const err = new (Class as unknown as new (m: string, o: object) => SandboxError)('msg', { cause, statusCode: 418 });
    expect(err).toBeInstanceOf(Error);
    expect(err).toBeInstanceOf(Class);
    for (const base of bases) expect(err).toBeInstanceOf(base);
    expect(err.name).toBe(Class.name);
    expect(err.cause).toBe(cause);
    expect(err.statusCode).toBe(418);
    expect(String(err)).toBe(`${Class.name}: msg`);
  });

  test('CommandExitError carries the result', () => {
    const err = new CommandExitError({ exitCode: 2, error: 'exit status 2', stdout: 'out', stderr: 'err' });
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toMatchObject({ exitCode: 2, error: 'exit status 2', stdout: 'out', stderr: 'err', name: 'CommandExitError' });
    expect(err.message).toBe('command exited with code 2: exit status 2');
  });

  test('classes are distinct: a file not found is no sandbox not found', () => {
    expect(new FileNotFoundError('x')).not.toBeInstanceOf(SandboxNotFoundError);
    expect(new NotFoundError('x')).not.toBeInstanceOf(FileNotFoundError);
    expect(new TimeoutError('x')).not.toBeInstanceOf(NotFoundError);
  });
});

describe('control API errors', () => {
  test.each<[string, ControlApiError, 'sandbox' | 'other', ErrorClass]>([
    ['400', controlError('bad_request', 400, 400), 'other', InvalidArgumentError],
    ['401', controlError('unauthorized', 401, 401), 'other', AuthenticationError],
    ['404 about a sandbox', controlError('not_found', 404, 404), 'sandbox', SandboxNotFoundError],
    ['404 about a template', controlError('not_found', 404, 404), 'other', NotFoundError],
    ['429', controlError('rate_limited', 429, 429), 'other', RateLimitError],
    ['507', controlError('server', 507, 507), 'other', NotEnoughSpaceError],
    ['409', controlError('conflict', 409, 409), 'sandbox', SandboxError],
    ['500', controlError('server', 500, 500), 'sandbox', SandboxError],
    ['a timeout', controlError('timeout'), 'sandbox', TimeoutError],
    ['a refused connection', controlError('network'), 'sandbox', ConnectionError],
  ])('%s', (_what, err, subject, Class) => {
    const mapped = fromControlError(err, subject);
    expect(mapped.constructor).toBe(Class);
    expect(mapped.cause).toBe(err);
    expect(mapped.statusCode).toBe(err.status);
    expect(mapped.message).toContain(err.message);
  });

  test("the body's code decides, as E2B clients read it", () => {
    // A proxy may turn the status into 400 while the body still says 404.
    expect(fromControlError(controlError('bad_request', 400, 404), 'sandbox')).toBeInstanceOf(SandboxNotFoundError);
    // With no body, the status is all there is.
    expect(fromControlError(controlError('not_found', 404), 'sandbox')).toBeInstanceOf(SandboxNotFoundError);
  });

  test('an SDK error passes through; anything else becomes a SandboxError with its cause', () => {
    const own = new TemplateError('too old');
    expect(fromControlError(own, 'other')).toBe(own);
    const odd = new TypeError('weird');
    const mapped = fromControlError(odd, 'other');
    expect(mapped.constructor).toBe(SandboxError);
    expect(mapped.cause).toBe(odd);
  });
});

describe('envd HTTP errors', () => {
  test.each<[EnvdHttpError | EnvdArgumentError, 'file' | 'other', ErrorClass]>([
    [envdError('bad_request', 400), 'file', InvalidArgumentError],
    [envdError('unauthorized', 401), 'file', AuthenticationError],
    [envdError('not_found', 404), 'file', FileNotFoundError],
    [envdError('not_found', 404), 'other', NotFoundError],
    [envdError('rate_limited', 429), 'file', RateLimitError],
    [envdError('unavailable', 502), 'file', SandboxNotFoundError],
    [envdError('unavailable', 503), 'file', SandboxError],
    [envdError('unavailable', 504), 'file', TimeoutError],
    [envdError('insufficient_storage', 507), 'file', NotEnoughSpaceError],
    [envdError('timeout'), 'file', TimeoutError],
    [envdError('server', 500), 'file', SandboxError],
    [envdError('network'), 'file', ConnectionError],
    [new EnvdArgumentError('metadata', 'bad key'), 'file', InvalidArgumentError],
  ])('%s (%s)', (err, subject, Class) => {
    const mapped = fromEnvdHttpError(err, subject);
    expect(mapped.constructor).toBe(Class);
    expect(mapped.cause).toBe(err);
  });

  test('502 says the sandbox is not running', () => {
    expect(fromEnvdHttpError(envdError('unavailable', 502), 'file').message).toMatch(/not running/);
  });
});

describe('RPC errors', () => {
  test.each<[Code, 'file' | 'other', ErrorClass]>([
    [Code.InvalidArgument, 'file', InvalidArgumentError],
    [Code.Unauthenticated, 'file', AuthenticationError],
    [Code.NotFound, 'file', FileNotFoundError],
    [Code.NotFound, 'other', NotFoundError],
    [Code.ResourceExhausted, 'file', NotEnoughSpaceError],
    [Code.ResourceExhausted, 'other', RateLimitError],
    [Code.DeadlineExceeded, 'other', TimeoutError],
    [Code.Unavailable, 'other', SandboxNotFoundError],
    [Code.Unavailable, 'file', SandboxNotFoundError],
    [Code.PermissionDenied, 'file', SandboxError],
    [Code.Internal, 'other', SandboxError],
  ])('%s (%s)', (code, subject, Class) => {
    const err = new ConnectError('it failed', code);
    const mapped = fromRpcError(err, subject);
    expect(mapped.constructor).toBe(Class);
    expect(mapped.cause).toBe(err);
    expect(mapped.message).toContain('it failed');
  });

  test('unavailable with a refused connection under it is a ConnectionError, not a missing sandbox', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const err = new ConnectError('connect ECONNREFUSED 127.0.0.1:1', Code.Unavailable, undefined, undefined, refused);
    const mapped = fromRpcError(err, 'file');
    expect(mapped.constructor).toBe(ConnectionError);
    expect(mapped.message).toMatch(/^cannot reach the sandbox: .*ECONNREFUSED/);
    expect(mapped.cause).toBe(err);
  });

  test('a plain error is read as Connect reads it', () => {
    const mapped = fromRpcError(new Error('socket hang up'), 'file');
    expect(mapped.constructor).toBe(SandboxError);
    expect(mapped.message).toContain('socket hang up');
  });
});
