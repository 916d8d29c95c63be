// The runtime's side of envd: waiting for it, initialising it, and opening
// port tunnels through it. All of it over the unix sockets that the runtime
// made for the sandbox, in a directory that only the host can reach: the
// paths come from the runtime, never from anything a sandbox can write.
import { request } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ConnectError } from '@connectrpc/connect';
import { EnvdClient, EnvdHttpError, type EnvdClientOptions } from '@paddock/envd-client';
import { RuntimeError, type EnvdInit } from './runtime.js';

/** Bound of the runtime's own calls to envd (not of the wait for its start). */
const CALL_TIMEOUT_MS = 5_000;

/**
 * A client of the envd behind `socketPath`, closed once `use` is done. The
 * URL only gives the Host header: the socket is what is connected to.
 */
async function withEnvd<T>(socketPath: string, options: Partial<EnvdClientOptions>, use: (envd: EnvdClient) => Promise<T>): Promise<T> {
  const envd = new EnvdClient({ envdUrl: 'http://localhost', socketPath, requestTimeoutMs: CALL_TIMEOUT_MS, ...options });
  try {
    return await use(envd);
  } finally {
    await envd.close();
  }
}

/** How often a boot checks, while envd has not answered yet, whether the container still runs. */
const FAILURE_POLL_MS = 50;
/** Pause before asking again when envd's socket refused or dropped a connection. */
const RETRY_MS = 5;

/**
 * Waits until envd answers on /health. The runtime made envd's socket and
 * listens on it before the container starts, so a connection is accepted by
 * the kernel at once and waits in the socket's backlog until envd takes it:
 * one request, answered the moment envd is up, with no polling of envd.
 * Meanwhile `failed` is asked every FAILURE_POLL_MS and returns a reason
 * once the sandbox can no longer come up (it must be cheap: a read of
 * /proc, not a runc process); a connection refused or dropped (envd died,
 * and its socket with it) is retried until then.
 */
export async function waitForEnvd(socketPath: string, timeoutMs: number, failed: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  await withEnvd(socketPath, {}, async (envd) => {
    for (;;) {
      const abort = new AbortController();
      let reason: string | undefined;
      const watch = setInterval(() => {
        reason = failed();
        if (reason) abort.abort();
      }, FAILURE_POLL_MS);
      try {
        if (await envd.health({ signal: abort.signal, requestTimeoutMs: Math.max(1, deadline - Date.now()) })) return;
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
  });
}

/** Whether envd answers on its socket; as the container's first process, it answers only while the container runs. */
export function envdAnswers(socketPath: string): Promise<boolean> {
  return withEnvd(socketPath, {}, (envd) => envd.health()).catch(() => false);
}

/**
 * What a sandbox's owner runs first with `commands.run`: a login shell, as
 * E2B's envd runs commands, as the default user.
 */
const LOGIN_SHELL_TRUE = { cmd: '/bin/bash', args: ['-l', '-c', 'true'] };
const TRUE = { cmd: '/bin/true' };

/**
 * Runs `process` (/bin/true unless given) through envd's process service,
 * in Connect's JSON or binary format, and resolves once envd ended the
 * stream without an error.
 */
export async function runTrue(socketPath: string, format: 'json' | 'binary', process: { cmd: string; args?: string[] } = TRUE): Promise<void> {
  await withEnvd(socketPath, { useBinaryFormat: format === 'binary' }, async (envd) => {
    try {
      for await (const _ of envd.process.start({ process, stdin: false }, { timeoutMs: CALL_TIMEOUT_MS })) {
        // Only the end of the stream, and whether it carries an error, matter.
      }
    } catch (err) {
      throw new RuntimeError('internal', `envd could not run a command: ${ConnectError.from(err).message}`, { cause: err });
    }
  });
}

/**
 * Rounds of commands, one in each Connect format, that a pooled sandbox's
 * envd runs before it waits for its claim. envd's code runs interpreted
 * at first and is compiled as it gets hot: on the 2-core machine of the
 * benchmarks its first commands took 6–10 ms each, against ~4 ms from about
 * the tenth on. Claimed sandboxes that had run 16 commands created and ran
 * their first one 1.3–3 ms sooner than those that had run 2 (interleaved
 * in one run), 10 gained less and 32 nothing more. The 14 extra commands
 * cost ~75 ms of each pooled boot, off anyone's path.
 */
export const WARM_UP_ROUNDS = 8;

/**
 * Warms up the envd of a pooled sandbox, nobody's yet. Its first round runs
 * a login shell (or /bin/true in an image without bash), so that the files
 * a login shell reads are looked up too; the rounds after it run /bin/true,
 * or the login shell where that does not run. Resolves with the number of
 * commands that ran; where none ran in the first round, it stops there (its
 * owner's first command pays).
 */
export async function warmUpEnvd(socketPath: string, rounds = WARM_UP_ROUNDS): Promise<number> {
  let ran = 0;
  let order = [LOGIN_SHELL_TRUE, TRUE];
  for (let round = 0; round < rounds; round++) {
    for (const format of ['json', 'binary'] as const) {
      for (const command of order) {
        const ok = await runTrue(socketPath, format, command).then(
          () => true,
          () => false,
        );
        if (ok) {
          ran++;
          break;
        }
      }
    }
    if (ran === 0) break;
    order = [TRUE, LOGIN_SHELL_TRUE];
  }
  return ran;
}

export async function initEnvd(socketPath: string, init: EnvdInit, currentToken?: string): Promise<void> {
  await withEnvd(socketPath, { accessToken: currentToken }, (envd) => initWith(envd, init));
}

async function initWith(envd: EnvdClient, init: EnvdInit): Promise<void> {
  try {
    await envd.init({ ...init, timestamp: new Date().toISOString() });
  } catch (err) {
    const status = err instanceof EnvdHttpError && err.status !== undefined ? ` (${err.status})` : '';
    throw new RuntimeError('internal', `envd refused /init${status}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * A connection to the envd of a pooled sandbox (no access token yet), kept
 * open from its warm-up to its claim: the claim's /init then neither sets up
 * a connection nor runs envd's handler for the first time (both were a good
 * part of a warm create on a small host).
 */
export class PooledEnvdLink {
  private readonly envd: EnvdClient;

  constructor(private readonly socketPath: string) {
    this.envd = new EnvdClient({ envdUrl: 'http://localhost', socketPath, requestTimeoutMs: CALL_TIMEOUT_MS });
  }

  /** Opens the connection with an /init that sets nothing. */
  warm(): Promise<void> {
    return initWith(this.envd, {});
  }

  /**
   * The claim's /init. Setting the same token and variables twice is
   * harmless, so a kept connection that envd closed meanwhile (idle past its
   * keep-alive) is retried on a new one; a dead envd fails both.
   */
  async init(init: EnvdInit): Promise<void> {
    try {
      await initWith(this.envd, init);
    } catch {
      await initEnvd(this.socketPath, init);
    }
  }

  close(): Promise<void> {
    return this.envd.close();
  }
}

/** Longest error body a refused tunnel is read for. */
const MAX_REFUSAL_BYTES = 8192;

/** Connects to TCP `port` inside the sandbox through envd's tunnel socket (`CONNECT 127.0.0.1:PORT`). */
export function openTunnel(tunnelSocket: string, port: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const target = `127.0.0.1:${port}`;
    const req = request({ socketPath: tunnelSocket, method: 'CONNECT', path: target, headers: { host: target }, agent: false });
    req.once('error', (err) => reject(new RuntimeError('unavailable', `sandbox tunnel is not reachable: ${err.message}`, { cause: err })));
    // Node hands over the socket of a CONNECT's answer whatever its status, with what came after the head.
    req.once('connect', (res, socket: Socket, head: Buffer) => {
      if (res.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        resolve(socket);
        return;
      }
      // A refusal carries `{code, message}` and closes the connection.
      const status = res.statusCode ?? 0;
      let body = head;
      let told = false;
      const done = (): void => {
        if (told) return;
        told = true;
        socket.destroy();
        let message = `tunnel answered ${status} ${res.statusMessage ?? ''}`.trim();
        try {
          message = (JSON.parse(body.toString()) as { message: string }).message;
        } catch {
          // keep the status line
        }
        reject(new RuntimeError(status === 400 ? 'invalid' : 'unavailable', message));
      };
      socket.on('data', (chunk: Buffer) => {
        body = Buffer.concat([body, chunk]);
        if (body.length > MAX_REFUSAL_BYTES) done();
      });
      socket.once('end', done);
      socket.once('error', done);
    });
    req.end();
  });
}
