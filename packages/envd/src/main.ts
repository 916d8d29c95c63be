// envd: serves one sandbox's filesystem and processes. `main` starts it;
// the entry point is launcher.ts (main.cjs), which loads this module's
// bundle (envd.cjs) with V8's code cache for it and then calls `main`.
//
//   node main.cjs [--port 49983] [--host 127.0.0.1] [--socket PATH]
//                 [--tunnel-socket PATH] [--listen-fd N] [--tunnel-fd N]
//                 [--access-token TOKEN]
//                 [--default-user NAME] [--default-workdir DIR]
//                 [--passwd-file PATH] [--group-file PATH]
//                 [--env NAME=VALUE]...
// First: protobuf-es looks Uint8Array.prototype.toBase64 up when it loads.
import './base64.js';
import { chmodSync, rmSync } from 'node:fs';
import { createServer as createHttp1Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type * as h2 from 'node:http2';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { log } from './log.js';
import { PipedChild } from './piped-child.js';
import { startReaper } from './reaper.js';
import { createEnvd } from './server.js';
import { native } from './native.js';
import { createTunnelServer } from './tunnel.js';
import { envdVersion } from './version.js';

/**
 * What became of the code cache the launcher offered V8 for this module:
 * used, refused (made by another node or with other options, or corrupt;
 * the module was then compiled from its source), there was none, or its
 * file could not be read (`codeCacheError` says why).
 */
export type CodeCacheStatus = 'accepted' | 'rejected' | 'none' | 'unreadable';

const usage = `usage: envd [--port N] [--host ADDR] [--socket PATH] [--tunnel-socket PATH]
            [--listen-fd N] [--tunnel-fd N]
            [--access-token TOKEN] [--default-user NAME] [--default-workdir DIR]
            [--passwd-file PATH] [--group-file PATH] [--env NAME=VALUE]...
            [--version]
Serves the filesystem and process APIs of the sandbox it runs in. With none of
--port, --socket and --listen-fd it listens on 127.0.0.1:49983. --listen-fd and
--tunnel-fd take listening sockets inherited from whoever started envd (the
runtime makes them outside the sandbox). The access token may also come from
the environment variable PADDOCK_ENVD_ACCESS_TOKEN or later from POST /init.
Each --env is a variable of the environment the processes envd starts begin
with (the image's); envd's own environment is never passed on.`;

function fail(message: string): never {
  process.stderr.write(`envd: ${message}\n${usage}\n`);
  process.exit(2);
}

function parse() {
  return parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      socket: { type: 'string' },
      'tunnel-socket': { type: 'string' },
      'listen-fd': { type: 'string' },
      'tunnel-fd': { type: 'string' },
      'access-token': { type: 'string' },
      'default-user': { type: 'string' },
      'default-workdir': { type: 'string' },
      'passwd-file': { type: 'string' },
      'group-file': { type: 'string' },
      env: { type: 'string', multiple: true },
      version: { type: 'boolean' },
      help: { type: 'boolean' },
    },
    strict: true,
  }).values;
}

/**
 * Parses the command line; on --help or --version prints and exits, on bad
 * arguments says what was wrong and exits with 2.
 */
function options() {
  let args: ReturnType<typeof parse>;
  try {
    args = parse();
  } catch (err) {
    fail((err as Error).message);
  }
  if (args.help) {
    process.stdout.write(usage + '\n');
    process.exit(0);
  }
  if (args.version) {
    process.stdout.write(envdVersion + '\n');
    process.exit(0);
  }
  const port = args.port === undefined ? (args.socket || args['listen-fd'] ? undefined : 49983) : Number(args.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) fail(`--port '${args.port}' is not a port number`);
  const fd = (name: 'listen-fd' | 'tunnel-fd') => {
    const raw = args[name];
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 3) fail(`--${name} '${raw}' is not an inherited descriptor (3 or more)`);
    return n;
  };
  const env: Record<string, string> = {};
  for (const pair of args.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) fail(`--env '${pair}' is not NAME=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return { ...args, port, listenFd: fd('listen-fd'), tunnelFd: fd('tunnel-fd'), env };
}

/**
 * node:http2, loaded on the first h2c connection: loading it (and the TLS
 * it brings) took ~9 ms of every envd start, before the first command of a
 * new sandbox could run, and the clients speak HTTP/1.1. Required rather
 * than imported: the bundle runs as CommonJS (see launcher.ts).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const loadHttp2 = () => require('node:http2') as typeof h2;

/**
 * One listener for HTTP/1.1 and cleartext HTTP/2 (h2c with prior
 * knowledge): a connection that opens with the HTTP/2 preface goes to
 * `http2()`, any other to `http1`.
 */
function frontServer(http1: Server, http2: () => h2.Http2Server): Server {
  return createNetServer({ noDelay: true }, (socket: Socket) => {
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      const server = first.subarray(0, 4).toString('latin1') === 'PRI ' ? http2() : http1;
      server.emit('connection', socket);
      process.nextTick(() => socket.resume());
    });
    socket.on('error', () => socket.destroy());
  });
}

type ListenTarget = { port: number; host: string } | { path: string } | { fd: number };

/**
 * Listens on `target`; a socket file is made 0600 and added to
 * `socketFiles`, to be removed on shutdown. An inherited descriptor is
 * marked close-on-exec first, so that no process envd starts holds it
 * (Node 20 happens to mark inherited descriptors so at its start; that is
 * not documented, so envd does not rely on it).
 */
function listen(server: Server, target: ListenTarget, socketFiles: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if ('fd' in target) {
      native.closeOnExec(target.fd);
      server.listen({ fd: target.fd }, () => resolve());
    } else if ('path' in target) {
      rmSync(target.path, { force: true });
      server.listen(target.path, () => {
        chmodSync(target.path, 0o600);
        socketFiles.push(target.path);
        resolve();
      });
    } else {
      server.listen(target.port, target.host, () => resolve());
    }
  });
}

/** Starts envd as its command line says; `codeCache` is reported in the `ready` line. */
export function main({ codeCache, codeCacheError }: { codeCache: CodeCacheStatus; codeCacheError?: string }): void {
  // A bug in one request must not take the whole sandbox down with it.
  process.on('uncaughtException', (err) => log.error('uncaught exception', { error: err.stack ?? String(err) }));
  process.on('unhandledRejection', (err) => log.error('unhandled rejection', { error: String(err) }));
  serve(options(), codeCache, codeCacheError).catch((err: Error) => {
    log.error('cannot start', { error: err.message });
    process.exit(1);
  });
}

async function serve(args: ReturnType<typeof options>, codeCache: CodeCacheStatus, codeCacheError: string | undefined): Promise<void> {
  const accessToken = args['access-token'] ?? process.env.PADDOCK_ENVD_ACCESS_TOKEN;
  delete process.env.PADDOCK_ENVD_ACCESS_TOKEN;

  const envd = createEnvd({
    accessToken,
    defaultUser: args['default-user'],
    defaultWorkdir: args['default-workdir'],
    passwdFile: args['passwd-file'],
    groupFile: args['group-file'],
    imageEnv: args.env,
  });
  const handler = (req: IncomingMessage, res: ServerResponse) => envd.handle(req, res);
  const http1 = createHttp1Server({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 }, handler);
  let http2: h2.Http2Server | undefined;
  const http2Server = () => (http2 ??= loadHttp2().createServer({}, handler as never));

  const servers: Server[] = [];
  const socketFiles: string[] = [];
  const ready: Record<string, unknown> = { version: envdVersion, codeCache };
  if (args.port !== undefined) {
    const s = frontServer(http1, http2Server);
    servers.push(s);
    await listen(s, { port: args.port, host: args.host! }, socketFiles);
    const addr = s.address();
    Object.assign(ready, { host: args.host, port: typeof addr === 'object' && addr ? addr.port : args.port });
  }
  if (args.socket) {
    const s = frontServer(http1, http2Server);
    servers.push(s);
    await listen(s, { path: args.socket }, socketFiles);
    ready.socket = args.socket;
  }
  if (args.listenFd !== undefined) {
    const s = frontServer(http1, http2Server);
    servers.push(s);
    await listen(s, { fd: args.listenFd }, socketFiles);
    ready.listenFd = args.listenFd;
  }
  if (args['tunnel-socket']) {
    const s = createTunnelServer();
    servers.push(s);
    await listen(s, { path: args['tunnel-socket'] }, socketFiles);
    ready.tunnelSocket = args['tunnel-socket'];
  }
  if (args.tunnelFd !== undefined) {
    const s = createTunnelServer();
    servers.push(s);
    await listen(s, { fd: args.tunnelFd }, socketFiles);
    ready.tunnelFd = args.tunnelFd;
  }
  // One line once every listener is up; the runtime and tests wait for it.
  // `ms`: since the process started, node's own start included.
  log.info('ready', { ...ready, ms: Math.round(performance.now()) });
  if (codeCache === 'rejected') {
    log.warn('V8 refused the code cache of envd.cjs (made by another node, or with other options), so every start compiles it; rebuild envd with the node that runs it');
  } else if (codeCache === 'unreadable') {
    log.warn('cannot read the code cache of envd.cjs, so this start compiled it', { error: codeCacheError });
  }
  const stopReaper = startReaper((pid) => envd.processes.has(pid) || PipedChild.owns(pid));

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    stopReaper();
    for (const s of servers) s.close();
    http1.closeAllConnections();
    await envd.shutdown();
    for (const f of socketFiles) rmSync(f, { force: true });
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
