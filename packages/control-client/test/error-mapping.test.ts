import { ControlApiError, ControlClient, type ControlErrorKind } from '../src/index.js';
import { json, startServer, type LocalServer } from './local-server.js';

let server: LocalServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const noRetries = { maxRetries: 0 };

async function failure(promise: Promise<unknown>): Promise<ControlApiError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ControlApiError);
    expect(err).toBeInstanceOf(Error);
    return err as ControlApiError;
  }
  throw new Error('expected the call to fail');
}

describe('errors from {code, message} bodies', () => {
  const cases: [number, ControlErrorKind][] = [
    [400, 'bad_request'],
    [401, 'unauthorized'],
    [403, 'forbidden'],
    [404, 'not_found'],
    [409, 'conflict'],
    [429, 'rate_limited'],
    [500, 'server'],
    [502, 'unavailable'],
    [503, 'unavailable'],
    [504, 'unavailable'],
    [507, 'insufficient_storage'],
    [418, 'http'],
  ];

  test.each(cases)('status %i is kind %s, with code and message from the body', async (status, kind) => {
    server = await startServer((_req, res) => json(res, status, { code: status, message: `reason ${status}` }));
    const client = new ControlClient({ apiUrl: server.url, retries: noRetries });
    const err = await failure(client.getSandbox('sbx-9'));
    expect(err.name).toBe('ControlApiError');
    expect(err.kind).toBe(kind);
    expect(err.status).toBe(status);
    expect(err.code).toBe(status);
    expect(err.serverMessage).toBe(`reason ${status}`);
    expect(err.method).toBe('GET');
    expect(err.path).toBe('/sandboxes/sbx-9');
    expect(err.message).toBe(`GET /sandboxes/sbx-9 failed with ${status}: reason ${status}`);
  });

  test('the body code is kept apart from the status, and error_code is kept', async () => {
    server = await startServer((_req, res) =>
      json(res, 400, { code: 404, message: 'template nope not found', error_code: 'template_not_found' }),
    );
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.createSandbox({ templateID: 'nope' }));
    expect(err.status).toBe(400);
    expect(err.code).toBe(404);
    expect(err.errorCode).toBe('template_not_found');
    expect(err.kind).toBe('bad_request');
  });

  test('a pause of a sandbox that is not running is a conflict', async () => {
    server = await startServer((_req, res) => json(res, 409, { code: 409, message: 'sandbox sbx1 is already paused' }));
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.pauseSandbox('sbx1', { memory: true }));
    expect(err.kind).toBe('conflict');
    expect(err.message).toBe('POST /sandboxes/sbx1/pause failed with 409: sandbox sbx1 is already paused');
  });
});

describe('errors from bodies that are not {code, message}', () => {
  test('a plain-text body becomes the message, with method, path and status', async () => {
    server = await startServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('plain failure\n');
    });
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.killSandbox('sbx1'));
    expect(err.kind).toBe('server');
    expect(err.code).toBeUndefined();
    expect(err.serverMessage).toBe('plain failure');
    expect(err.message).toBe('DELETE /sandboxes/sbx1 failed with 500: plain failure');
  });

  test('an empty body (Content-Length: 0) still names method, path and status', async () => {
    server = await startServer((_req, res) => res.writeHead(404, { 'content-length': '0' }).end());
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.getTemplateByAlias('missing'));
    expect(err.kind).toBe('not_found');
    expect(err.status).toBe(404);
    expect(err.code).toBeUndefined();
    expect(err.serverMessage).toBeUndefined();
    expect(err.message).toBe('GET /templates/aliases/missing failed with 404: empty body (Not Found)');
  });

  test('an empty chunked body is handled like an empty one', async () => {
    server = await startServer((_req, res) => {
      res.writeHead(401);
      res.end();
    });
    const client = new ControlClient({ apiUrl: server.url, apiKey: 'wrong' });
    const err = await failure(client.listTemplates());
    expect(err.kind).toBe('unauthorized');
    expect(err.message).toBe('GET /templates failed with 401: empty body (Unauthorized)');
  });

  test('JSON without a message is shown as JSON', async () => {
    server = await startServer((_req, res) => json(res, 400, { field: 'timeout' }));
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.setTimeout('sbx1', { timeout: -1 }));
    expect(err.serverMessage).toBe('{"field":"timeout"}');
    expect(err.code).toBeUndefined();
  });

  test('a 200 without the body the operation returns is an invalid response', async () => {
    server = await startServer((_req, res) => res.writeHead(200, { 'content-length': '0' }).end());
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.getSandbox('sbx1'));
    expect(err.kind).toBe('invalid_response');
    expect(err.status).toBe(200);
    expect(err.message).toBe('GET /sandboxes/sbx1 answered 200 without the expected JSON body');
  });

  test('a 200 whose body is not JSON is an invalid response that keeps the parse error', async () => {
    server = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '9' });
      res.end('not json!');
    });
    const client = new ControlClient({ apiUrl: server.url });
    const err = await failure(client.listTemplates());
    expect(err.kind).toBe('invalid_response');
    expect((err.cause as Error).name).toBe('SyntaxError');
  });
});
