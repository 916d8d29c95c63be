// The runtime's side of envd: waiting for it, initialising it, and opening
// port tunnels through it. All of it over the unix sockets that the runtime
// made for the sandbox, in a directory that only the host can reach.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { RuntimeError, type EnvdInit } from './runtime.js';

/** One request to envd; a body that is not bytes is sent as JSON. */
function call(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const json = body !== undefined && !Buffer.isBuffer(body);
    const payload: Buffer | undefined = json ? Buffer.from(JSON.stringify(body)) : (body as Buffer | undefined);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: {
          ...(json ? { 'content-type': 'application/json' } : {}),
          ...headers,
          ...(payload ? { 'content-length': payload.length } : {}),
        },
        agent: false,
        signal: opts.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      },
    );
    const timeoutMs = opts.timeoutMs ?? 5000;
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path} got no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** How often a boot checks, while envd has not answered yet, whether the container still runs. */
const FAILURE_POLL_MS = 50;
/** Pause before asking again when envd's socket refused or dropped a connection. */
const RETRY_MS = 5;

/**
 * Waits until envd answers 204 on /health. The runtime made envd's socket
 * and listens on it before the container starts, so a connection is
 * accepted by the kernel at once and waits in the socket's backlog until
 * envd takes it: one request, answered the moment envd is up, with no
 * polling of envd. Meanwhile `failed` is asked every FAILURE_POLL_MS and
 * returns a reason once the sandbox can no longer come up (it must be
 * cheap: a read of /proc, not a runc process); a connection refused or
 * dropped (envd died, and its socket with it) is retried until then.
 */
export async function waitForEnvd(socketPath: string, timeoutMs: number, failed: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const abort = new AbortController();
    let reason: string | undefined;
    const watch = setInterval(() => {
      reason = failed();
      if (reason) abort.abort();
    }, FAILURE_POLL_MS);
    try {
      const res = await call(socketPath, 'GET', '/health', undefined, {}, { timeoutMs: Math.max(1, deadline - Date.now()), signal: abort.signal });
      if (res.status === 204) return;
    } catch {
      // refused, dropped, aborted or timed out: told apart below
    } finally {
      clearInterval(watch);
    }
    reason ??= failed();
    if (reason) throw new RuntimeError('unavailable', `envd did not start: ${reason}`);
    if (Date.now() >= deadline) throw new RuntimeError('unavailable', `envd did not answer on ${socketPath} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, RETRY_MS));
  }
}

/** Whether envd answers on its socket; as the container's first process, it answers only while the container runs. */
export async function envdAnswers(socketPath: string): Promise<boolean> {
  try {
    return (await call(socketPath, 'GET', '/health')).status === 204;
  } catch {
    return false;
  }
}

/** `StartRequest { process: { cmd: "/bin/true" }, stdin: false }` (proto/process/process.proto) in each Connect format. */
const RUN_TRUE = {
  json: Buffer.from(JSON.stringify({ process: { cmd: '/bin/true' }, stdin: false })),
  // Field 1 (process, 11 bytes long) holding field 1 (cmd, 9 bytes); field 4 (stdin) false.
  binary: Buffer.concat([Buffer.from([0x0a, 0x0b, 0x0a, 0x09]), Buffer.from('/bin/true'), Buffer.from([0x20, 0x00])]),
};

/**
 * Runs `/bin/true` through envd's process service, in Connect's JSON or
 * binary format, and resolves once envd ended the stream without an error.
 */
export async function runTrue(socketPath: string, format: 'json' | 'binary'): Promise<void> {
  const message = RUN_TRUE[format];
  const request = Buffer.alloc(5 + message.length);
  request.writeUInt32BE(message.length, 1);
  message.copy(request, 5);
  const res = await call(socketPath, 'POST', '/process.Process/Start', request, {
    'content-type': format === 'json' ? 'application/connect+json' : 'application/connect+proto',
    'connect-protocol-version': '1',
  });
  if (res.status !== 200) throw new RuntimeError('internal', `envd refused to run a command (${res.status}): ${res.body.toString()}`);
  // Frames: a flags byte, a 4-byte length, the message. The one flagged 2
  // ends the stream, in JSON whatever the format, with the error if any.
  for (let at = 0; at + 5 <= res.body.length; at += 5 + res.body.readUInt32BE(at + 1)) {
    if ((res.body[at]! & 0x02) === 0) continue;
    const end = JSON.parse(res.body.subarray(at + 5, at + 5 + res.body.readUInt32BE(at + 1)).toString()) as { error?: { message?: string } };
    if (end.error) throw new RuntimeError('internal', `envd could not run a command: ${end.error.message ?? 'unknown error'}`);
    return;
  }
  throw new RuntimeError('internal', 'envd answered a command without ending its stream');
}

export async function initEnvd(socketPath: string, init: EnvdInit, currentToken?: string): Promise<void> {
  const body = { ...init, timestamp: new Date().toISOString() };
  const res = await call(socketPath, 'POST', '/init', body, currentToken ? { 'x-access-token': currentToken } : {});
  if (res.status !== 204) throw new RuntimeError('internal', `envd refused /init (${res.status}): ${res.body.toString()}`);
}

/** Connects to TCP `port` inside the sandbox through envd's tunnel socket. */
export function openTunnel(tunnelSocket: string, port: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const sock: Socket = connect(tunnelSocket);
    let head = Buffer.alloc(0);
    const fail = (err: Error) => {
      sock.destroy();
      reject(err);
    };
    sock.once('error', (err) => fail(new RuntimeError('unavailable', `sandbox tunnel is not reachable: ${err.message}`)));
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 8192) fail(new RuntimeError('internal', 'tunnel answered with an oversized header'));
        return;
      }
      sock.off('data', onData);
      sock.removeAllListeners('error');
      const statusLine = head.subarray(0, head.indexOf('\r\n')).toString();
      const rest = head.subarray(end + 4);
      if (/^HTTP\/1\.1 200 /.test(statusLine)) {
        if (rest.length) sock.unshift(rest);
        resolve(sock);
        return;
      }
      let message = statusLine;
      try {
        message = (JSON.parse(rest.toString()) as { message: string }).message;
      } catch {
        // keep the status line
      }
      fail(new RuntimeError(/ 400 /.test(statusLine) ? 'invalid' : 'unavailable', message));
    };
    sock.on('data', onData);
    sock.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  });
}
