import { createHash } from 'node:crypto';
import {
  ENVD_PORT,
  MAX_METADATA_BYTES,
  answerFailure,
  callFailure,
  encodeFileSignature,
  describeFailure,
  errorKindOf,
  failureOf,
  fileOperationOf,
  fileSignaturePayload,
  isSandboxId,
  isTcpPort,
  metadataProblem,
  parseSandboxHost,
  sandboxHost,
  withHttpCallFields,
  type HttpCallErrorDetails,
} from '../src/index.js';

function sign(payload: string): string {
  return encodeFileSignature(createHash('sha256').update(payload).digest());
}

describe('signed file URLs', () => {
  test('sign path:operation:user:token[:expiration] as v1_ + unpadded base64 of its SHA-256', () => {
    const payload = fileSignaturePayload({ path: '/home/user/a b.txt', operation: 'read', accessToken: 'tok', expiration: 1700000000 });
    expect(payload).toBe('/home/user/a b.txt:read::tok:1700000000');
    expect(sign(payload)).toBe('v1_' + createHash('sha256').update(payload).digest('base64').replace(/=+$/, ''));
    expect(fileSignaturePayload({ path: 'x', operation: 'write', user: 'root', accessToken: 'tok' })).toBe('x:write:root:tok');
  });

  test('a digest whose base64 has padding loses it, one without keeps every character', () => {
    expect(encodeFileSignature(new Uint8Array([0xff]))).toBe('v1_/w');
    expect(encodeFileSignature(new Uint8Array([1, 2, 3]))).toBe('v1_AQID');
  });

  test('reads are GET and HEAD, everything else writes', () => {
    expect(fileOperationOf('GET')).toBe('read');
    expect(fileOperationOf('HEAD')).toBe('read');
    expect(fileOperationOf('POST')).toBe('write');
  });
});

describe('sandbox ids and hosts', () => {
  test('an id is a DNS label of lowercase letters and digits', () => {
    expect(isSandboxId('abc123')).toBe(true);
    expect(isSandboxId('ABC')).toBe(false);
    expect(isSandboxId('a-b')).toBe(false);
    expect(isSandboxId('a'.repeat(64))).toBe(false);
    expect(isSandboxId(7)).toBe(false);
  });

  test('a proxy host names a port and a sandbox, and is built back the same way', () => {
    expect(parseSandboxHost(sandboxHost(ENVD_PORT, 'abc', 'paddock.test'))).toEqual({ port: ENVD_PORT, sandboxId: 'abc' });
    expect(parseSandboxHost('3000-x1.localhost:3001')).toEqual({ port: 3000, sandboxId: 'x1' });
    expect(parseSandboxHost('localhost:3001')).toBeUndefined();
    expect(parseSandboxHost('3000-UPPER.domain')).toBeUndefined();
    expect(isTcpPort(99999)).toBe(false);
    expect(isTcpPort(0)).toBe(false);
    expect(isTcpPort(65535)).toBe(true);
  });
});

describe('file metadata', () => {
  test('acceptable entries pass', () => {
    expect(metadataProblem([['owner', 'me'], ['x-y', '']])).toBeUndefined();
  });

  test('each broken limit is named', () => {
    expect(metadataProblem([['a b', 'v']])).toContain('metadata key "a b"');
    expect(metadataProblem([['k'.repeat(247), 'v']])).toContain('the limit is 246');
    expect(metadataProblem([['k', 'é']])).toContain('metadata value of "k" must be printable ASCII');
    const big = Array.from({ length: 5 }, (_, i) => [`k${i}`, 'v'.repeat(1000)] as const);
    expect(metadataProblem(big)).toBe(`metadata is ${5 * 1002} bytes in all; the limit is ${MAX_METADATA_BYTES}`);
  });
});

test('statuses map to the kinds clients act on', () => {
  expect(errorKindOf(400)).toBe('bad_request');
  expect(errorKindOf(502)).toBe('unavailable');
  expect(errorKindOf(507)).toBe('insufficient_storage');
  expect(errorKindOf(500)).toBe('server');
  expect(errorKindOf(409)).toBe('conflict');
  expect(errorKindOf(418)).toBe('http');
});

test('a call with no answer is told by why: the caller, a deadline, a body that is not JSON, or the network with its causes', () => {
  const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
  expect(failureOf(timeout, true).kind).toBe('aborted');
  expect(failureOf(timeout, false)).toEqual({ kind: 'timeout', what: 'timed out' });
  expect(failureOf(new SyntaxError('Unexpected token'), false).kind).toBe('invalid_response');
  const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) });
  expect(failureOf(refused, false)).toEqual({ kind: 'network', what: 'failed: fetch failed: connect ECONNREFUSED 127.0.0.1:1 (ECONNREFUSED)' });
  expect(describeFailure('plain')).toBe('plain');
});

describe('errors of failed HTTP calls', () => {
  test('a {code, message} body is read leniently: a code of digits as a string, error_code, a message-less body as a whole', () => {
    expect(answerFailure('GET', '/x', 404, 'Not Found', { code: 404, message: 'no such x' })).toEqual({
      message: 'GET /x failed with 404: no such x',
      details: { kind: 'not_found', method: 'GET', path: '/x', status: 404, code: 404, errorCode: undefined, serverMessage: 'no such x' },
    });
    expect(answerFailure('POST', '/y', 409, '', { code: '409', message: 'busy', error_code: 'in_use' }).details).toMatchObject({
      kind: 'conflict',
      code: 409,
      errorCode: 'in_use',
    });
    expect(answerFailure('GET', '/x', 400, '', { code: 'four hundred', field: 'a' }).details).toMatchObject({
      code: undefined,
      serverMessage: '{"code":"four hundred","field":"a"}',
    });
  });

  test('a text body is the message; no body names the status text', () => {
    expect(answerFailure('GET', '/x', 502, 'Bad Gateway', '  proxy: upstream gone \n').message).toBe('GET /x failed with 502: proxy: upstream gone');
    expect(answerFailure('GET', '/x', 401, 'Unauthorized', '').message).toBe('GET /x failed with 401: empty body (Unauthorized)');
    expect(answerFailure('GET', '/x', 500, '', undefined)).toMatchObject({ message: 'GET /x failed with 500: empty body', details: { serverMessage: undefined } });
  });

  test('a call with no answer keeps its cause', () => {
    const cause = new Error('socket hang up');
    expect(callFailure('GET', '/x', cause, false)).toEqual({
      message: 'GET /x failed: socket hang up',
      details: { kind: 'network', method: 'GET', path: '/x', cause },
    });
  });

  test('the mixin adds the fields and keeps the class it extends, and its cause', () => {
    class BaseError extends Error {}
    class CallError extends withHttpCallFields(BaseError) {
      constructor(message: string, details: HttpCallErrorDetails) {
        super(message, details);
      }
    }
    const cause = new Error('underneath');
    const { message, details } = answerFailure('GET', '/x', 507, '', { code: 507, message: 'disk full' });
    const err = new CallError(message, { ...details, cause });
    expect(err).toBeInstanceOf(BaseError);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ message: 'GET /x failed with 507: disk full', kind: 'insufficient_storage', method: 'GET', path: '/x', status: 507, code: 507, serverMessage: 'disk full' });
    expect(err.cause).toBe(cause);
    expect('cause' in new CallError('m', { kind: 'http', method: 'GET', path: '/' })).toBe(false);
  });
});
