// Stopping the server: what is under way (a command's output streaming
// through the proxy) may finish within the grace period, new requests are
// refused with a 503 saying why, and what outlasts the grace is cut (streams
// from envd ended first with the reason, which their clients get). With no
// grace, a create still booting whose client has gone (a Ctrl-C reaches the
// client and the server together) is undone, not left behind, and does not
// end as an internal error about a closed database.
import { existsSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { auditLog } from '../../../tools/testing/log-audit.mjs';
import { API_KEY, envd, eventually, sleep, testServer } from './harness.js';

test('a create booting when the server closes, whose client went away, is undone without an internal error', async () => {
  const t = await testServer({ shutdownGraceMs: 0 });
  try {
    const sandboxes = join(t.home, 'runtime', 'sandboxes');
    const req = request(`${t.server.apiUrl}/v2/sandboxes`, { method: 'POST', headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' } });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ templateID: 'base', timeout: 60 }));
    await eventually(() => existsSync(sandboxes) && readdirSync(sandboxes).length > 0, 'a boot under way');
    req.destroy();
    await t.server.close();
    // The request's handler goes on after the close, and removes the sandbox once its boot ended.
    await eventually(() => readdirSync(sandboxes).length === 0, 'the booted sandbox removed', 30_000);
    // The handler answers (to no one) right after the removal.
    await sleep(500);
    // Nothing was logged as an error: not the create, not anything it left to background work.
    expect(auditLog(t.server.config.logFile!).filter((line) => Number(line.level) >= 50)).toEqual([]);
  } finally {
    await t.teardown();
  }
});

async function sandboxOf(t: Awaited<ReturnType<typeof testServer>>) {
  const s = await t.control.createSandbox({ templateID: 'base' });
  return { id: s.sandboxID, token: s.envdAccessToken! };
}

test('a command streaming when the server stops finishes within the grace; new connections are refused meanwhile', async () => {
  const t = await testServer({ shutdownGraceMs: 20_000 });
  try {
    const { id, token } = await sandboxOf(t);
    const lines: string[] = [];
    let exitCode: number | undefined;
    const stream = (async () => {
      for await (const r of envd(t.server, id, token).proc.start({ process: { cmd: '/bin/bash', args: ['-c', 'for i in 1 2 3 4 5; do echo $i; sleep 0.4; done'] }, stdin: false })) {
        const ev = r.event?.event;
        if (ev?.case === 'data' && ev.value.output.case === 'stdout') lines.push(Buffer.from(ev.value.output.value).toString());
        if (ev?.case === 'end') exitCode = ev.value.exitCode;
      }
    })();
    await eventually(() => lines.length > 0, 'the first line');
    const closed = t.server.close();
    await sleep(100);
    const api = await fetch(`${t.server.apiUrl}/v2/sandboxes`, { headers: { 'x-api-key': API_KEY } }).catch((e: Error) => e);
    // The API stopped listening: a new connection is refused outright.
    expect(api).toMatchObject({ message: 'fetch failed', cause: { code: 'ECONNREFUSED' } });
    await stream;
    expect(lines.join('')).toBe('1\n2\n3\n4\n5\n');
    expect(exitCode).toBe(0);
    await closed;
  } finally {
    await t.teardown();
  }
});

test('an idle kept-alive connection is closed at the stop (a request on it is told why if it gets in); a stream outlasting the grace is ended at its end, telling its client why', async () => {
  const t = await testServer({ shutdownGraceMs: 1_500 });
  try {
    const { id, token } = await sandboxOf(t);
    // A connection the client keeps open to the proxy, used again after the stop began.
    const agent = new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 1 });
    const ask = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${t.server.proxyUrl}/health`, { agent, headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': '49983' } }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
    expect((await ask()).status).toBe(204);
    let ended = '';
    const stream = (async () => {
      try {
        for await (const r of envd(t.server, id, token).proc.start({ process: { cmd: '/bin/sleep', args: ['60'] }, stdin: false })) void r;
        ended = 'ended';
      } catch (err) {
        ended = (err as Error).message;
      }
    })();
    await sleep(500);
    const started = Date.now();
    const closed = t.server.close();
    await sleep(100);
    // The kept connection was idle: the stop closed it, so this request finds the proxy gone or is told why.
    const again = await ask().catch((e: Error) => ({ status: 0, body: e.message }));
    expect(again.status === 0 || (again.status === 503 && again.body.includes('the server is shutting down'))).toBe(true);
    await stream;
    await closed;
    // Told why, by envd (the stream's end passes the proxy before the cut), rather than seeing the connection drop.
    expect(ended).toMatch(/^\[unavailable\] the Paddock server is stopping, and this stream ends here/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_300);
    expect(Date.now() - started).toBeLessThan(15_000);
    const cut = auditLog(t.server.config.logFile!).filter((l) => l.msg === 'shutting down: what was still under way at the deadline is cut');
    expect(cut).toEqual([expect.objectContaining({ proxyConnections: 1, graceMs: 1_500 })]);
    agent.destroy();
  } finally {
    await t.teardown();
  }
});
