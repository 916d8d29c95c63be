// The process.Process Connect service.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import {
  ConnectResponseSchema,
  type Process,
  ProcessEventSchema,
  ProcessInfoSchema,
  Signal,
  StartResponseSchema,
  type ConnectResponse,
  type ProcessEvent,
  type ProcessInput,
  type StartResponse,
} from '@paddock/models';
import { basicAuthUser } from './auth.js';
import { untilAborted, type EventQueue } from './event-queue.js';
import { keepaliveIntervalMs } from './headers.js';
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

/** A new client of `proc`, with keepalives at the rate its headers ask for. */
function follow(proc: ManagedProcess, header: Headers): EventQueue<ProcessEvent> {
  const queue = proc.attach();
  queue.keepalive(keepaliveIntervalMs(header), () => create(ProcessEventSchema, { event: { case: 'keepalive', value: {} } }));
  return queue;
}

export function processService(state: EnvdState, manager: ProcessManager): ServiceImpl<typeof Process> {
  return {
    list() {
      return {
        processes: manager.list().map((p: ManagedProcess) =>
          create(ProcessInfoSchema, { pid: p.pid, tag: p.tag, config: p.config }),
        ),
      };
    },

    async *start(req, ctx): AsyncIterable<StartResponse> {
      const cfg = req.process;
      if (!cfg || !cfg.cmd) throw new ConnectError('process.cmd is required', Code.InvalidArgument);
      const user = state.rpcUser(basicAuthUser(ctx.requestHeader.get('authorization')));
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
        imageEnv: state.imageEnv,
        tag: req.tag,
        stdin: req.stdin ?? true,
        pty: req.pty ? { cols: req.pty.size?.cols ?? 80, rows: req.pty.size?.rows ?? 24 } : undefined,
      });
      // A deadline on Start bounds the process's life, as E2B's envd does,
      // whether or not the client is still reading; a client that merely
      // goes away leaves the process running.
      const timeoutMs = ctx.timeoutMs();
      if (timeoutMs !== undefined) {
        const killer = setTimeout(() => proc.signal('SIGKILL'), Math.max(0, timeoutMs));
        void proc.ended$.then(() => clearTimeout(killer));
      }
      // A client that goes away stops its stream; the process keeps running.
      for await (const event of untilAborted(follow(proc, ctx.requestHeader), ctx.signal, state.streams)) yield create(StartResponseSchema, { event });
    },

    async *connect(req, ctx): AsyncIterable<ConnectResponse> {
      const proc = manager.find(req.process?.selector ?? { case: undefined });
      for await (const event of untilAborted(follow(proc, ctx.requestHeader), ctx.signal, state.streams)) yield create(ConnectResponseSchema, { event });
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
