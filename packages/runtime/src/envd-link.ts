// The runtime's side of envd: waiting for it, initialising it, and opening
// port tunnels through it. All of it over unix sockets in the sandbox's run
// directory, which only the host can reach.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { RuntimeError, type EnvdInit } from './runtime.js';

function call(socketPath: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
        agent: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.setTimeout(5000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Polls envd's /health until it answers 204. `failed` is checked between
 * attempts and returns a reason when the sandbox can no longer come up.
 */
export async function waitForEnvd(socketPath: string, timeoutMs: number, failed: () => Promise<string | undefined>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 2;
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await call(socketPath, 'GET', '/health');
      if (res.status === 204) return;
    } catch {
      // not listening yet
    }
    if (attempt % 10 === 9) {
      const reason = await failed();
      if (reason) throw new RuntimeError('unavailable', `envd did not start: ${reason}`);
    }
    if (Date.now() > deadline) throw new RuntimeError('unavailable', `envd did not answer on ${socketPath} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 25);
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

export async function initEnvd(socketPath: string, init: EnvdInit, currentToken?: string): Promise<void> {
  const body = { ...init, timestamp: new Date().toISOString() };
  const res = await call(socketPath, 'POST', '/init', body, currentToken ? { 'x-access-token': currentToken } : {});
  if (res.status !== 204) throw new RuntimeError('internal', `envd refused /init (${res.status}): ${res.text}`);
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
