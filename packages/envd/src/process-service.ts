// The process.Process Connect service.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import {
  ConnectResponseSchema,
  type Process,
  ProcessEventSchema,
  ProcessInfoSchema,
  Signal,
  StartResponseSchema,
  type ConnectRequest,
  type ConnectResponse,
  type ProcessEvent,
  type ProcessInput,
  type StartRequest,
  type StartResponse,
} from '@paddock/models';
import { basicAuthUser } from './auth.js';
import type { EventQueue } from './event-queue.js';
import { keepaliveIntervalMs, type HeaderReader } from './headers.js';
import { resolveUserPath } from './paths.js';
import type { ManagedProcess, ProcessManager } from './process-manager.js';
import type { EnvdState } from './state.js';

function inputBytes(input: ProcessInput | undefined): Uint8Array {
  const v = input?.input;
  if (!v || v.case === undefined) throw new ConnectError('input is empty: set stdin or pty bytes', Code.InvalidArgument);
  return v.value;
}

const signals: Partial<Record<Signal, NodeJS.Signals>> = {
  [Signal.SIGTERM]: 'SIGTERM',
  [Signal.SIGKILL]: 'SIGKILL',
};

/** Start and Connect as calls, apart from how their events go out (see process-stream.ts). */
export interface ProcessCalls {
  /** Starts the process a Start request asks for; its events, from its start on, for one client. */
  start(req: StartRequest, header: HeaderReader, timeoutMs: number | undefined): Promise<EventQueue<ProcessEvent>>;
  /** The events of the running process a Connect request names, for one client. */
  connect(req: ConnectRequest, header: HeaderReader): EventQueue<ProcessEvent>;
}

/** A new client of `proc`, with keepalives at the rate its headers ask for. */
function follow(proc: ManagedProcess, header: HeaderReader): EventQueue<ProcessEvent> {
  const queue = proc.attach();
  queue.keepalive(keepaliveIntervalMs(header), () => create(ProcessEventSchema, { event: { case: 'keepalive', value: {} } }));
  return queue;
}

export function processCalls(state: EnvdState, manager: ProcessManager): ProcessCalls {
  return {
    async start(req, header, timeoutMs) {
      const cfg = req.process;
      if (!cfg || !cfg.cmd) throw new ConnectError('process.cmd is required', Code.InvalidArgument);
      const user = state.rpcUser(basicAuthUser(header.get('authorization')));
      // Without a cwd of its own the process starts in the default workdir
      // (from /init or --default-workdir), which may be written as `~/...` or
      // relative to the home too: resolved for the acting user, as any path.
      const cwd = resolveUserPath(cfg.cwd || state.defaultWorkdir || '', user);
      const proc = await manager.start({
        cmd: cfg.cmd,
        args: cfg.args,
        envs: cfg.envs,
        cwd,
        user,
        baseEnv: Object.fromEntries(state.envVars),
        tag: req.tag,
        stdin: req.stdin ?? true,
        pty: req.pty ? { cols: req.pty.size?.cols ?? 80, rows: req.pty.size?.rows ?? 24 } : undefined,
      });
      // A deadline on Start bounds the process's life, as E2B's envd does,
      // whether or not the client is still reading; a client that merely
      // goes away leaves the process running.
      if (timeoutMs !== undefined) {
        const killer = setTimeout(() => proc.signal('SIGKILL'), Math.max(0, timeoutMs));
        void proc.ended$.then(() => clearTimeout(killer));
      }
      return follow(proc, header);
    },

    connect(req, header) {
      return follow(manager.find(req.process?.selector ?? { case: undefined }), header);
    },
  };
}

/**
 * Streams a client's events until the process ends or the client goes away
 * (the process keeps running then).
 */
async function* stream<T>(queue: EventQueue<ProcessEvent>, ctx: HandlerContext, wrap: (ev: ProcessEvent) => T): AsyncGenerator<T> {
  const stop = () => queue.close();
  ctx.signal.addEventListener('abort', stop);
  try {
    for await (const ev of queue) yield wrap(ev);
  } finally {
    ctx.signal.removeEventListener('abort', stop);
    queue.close();
  }
}

export function processService(calls: ProcessCalls, manager: ProcessManager): ServiceImpl<typeof Process> {
  return {
    list() {
      return {
        processes: manager.list().map((p: ManagedProcess) =>
          create(ProcessInfoSchema, { pid: p.pid, tag: p.tag, config: p.config }),
        ),
      };
    },

    async *start(req, ctx): AsyncIterable<StartResponse> {
      const queue = await calls.start(req, ctx.requestHeader, ctx.timeoutMs());
      yield* stream(queue, ctx, (event) => create(StartResponseSchema, { event }));
    },

    async *connect(req, ctx): AsyncIterable<ConnectResponse> {
      yield* stream(calls.connect(req, ctx.requestHeader), ctx, (event) => create(ConnectResponseSchema, { event }));
    },

    update(req) {
      const proc = manager.find(req.process?.selector ?? { case: undefined });
      if (!req.pty?.size) throw new ConnectError('pty.size is required', Code.InvalidArgument);
      proc.resize(req.pty.size.cols, req.pty.size.rows);
      return {};
    },

    async streamInput(requests) {
      let proc: ManagedProcess | undefined;
      for await (const req of requests) {
        switch (req.event.case) {
          case 'start':
            proc = manager.find(req.event.value.process?.selector ?? { case: undefined });
            break;
          case 'data':
            if (!proc) throw new ConnectError('the input stream must begin with a start event naming the process', Code.InvalidArgument);
            proc.writeInput(inputBytes(req.event.value.input));
            break;
          default:
            break; // keepalive
        }
      }
      return {};
    },

    sendInput(req) {
      const proc = manager.find(req.process?.selector ?? { case: undefined });
      proc.writeInput(inputBytes(req.input));
      return {};
    },

    sendSignal(req) {
      const proc = manager.find(req.process?.selector ?? { case: undefined });
      const signal = signals[req.signal];
      if (!signal) throw new ConnectError(`signal SIGNAL_${Signal[req.signal] ?? req.signal} is not supported`, Code.InvalidArgument);
      proc.signal(signal);
      return {};
    },

    closeStdin(req) {
      manager.find(req.process?.selector ?? { case: undefined }).closeStdin();
      return {};
    },
  };
}
