// What a bench process made on the host must not outlive it when the run is
// stopped (Ctrl-C, `kill`): running containers, overlay mounts, temporary
// directories. Node's default on SIGINT and SIGTERM is to end at once, which
// left all three behind. Whatever makes such a thing registers its undoing
// here and uses the function it gets back as its normal `close`:
//
//   const close = undoOnInterrupt(async () => { ...unmount, remove... });
//   try { ... } finally { await close(); }
//
// `undoAllOnSignals()` (once per process) makes SIGINT and SIGTERM run every
// undoing not yet run, newest first, and then end the process with 128 + the
// signal's number. Signals that come while it undoes are ignored, and the
// stopped code's failures that nothing catches are reported and survived:
// cut short, the undoing would leave what it is there to remove.
import { rmSync } from 'node:fs';
import { constants } from 'node:os';
import { resolve } from 'node:path';

/** The signals that stop a run: Ctrl-C, and `kill`'s default. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM'];

/** The exit code of a process that ends because of `signal`, as a shell reports it. */
export const exitCodeOf = (signal) => 128 + constants.signals[signal];

/** The undoings not yet finished: not started, or started and running. */
const undos = new Set();
let unwinding = null;

/**
 * Registers `fn` to run should the process be interrupted; returns a function
 * that runs it (once: later calls, and an interruption after, get the same
 * promise) for the normal path.
 */
export function undoOnInterrupt(fn) {
  let done = null;
  const once = () => (done ??= Promise.resolve().then(fn).finally(() => undos.delete(once)));
  undos.add(once);
  return once;
}

/** Makes SIGINT and SIGTERM undo what is registered, then end the process. */
export function undoAllOnSignals() {
  for (const signal of STOP_SIGNALS) process.on(signal, () => void (unwinding ??= unwind(signal)));
}

/** Null, or the promise of the undoing a signal started (it ends the process). */
export const interrupted = () => unwinding;

async function unwind(signal) {
  process.stderr.write(`[bench] ${signal}: removing what this run made before it ends\n`);
  // The stopped code fails wherever it was, at times where nothing catches
  // it (an event handler, a promise no one awaits any more). Such a failure
  // is reported; it must not end the process before the undoing is done.
  const report = (err) => process.stderr.write(`[bench] after ${signal}: ${err?.message ?? err}\n`);
  process.on('uncaughtException', report).on('unhandledRejection', report);
  // What the interrupted code registers meanwhile is undone too, and what
  // its own cleanup already started is waited for.
  while (undos.size) {
    const newest = [...undos].at(-1);
    await newest().catch((err) => process.stderr.write(`[bench] ${err.message}\n`));
  }
  process.exit(exitCodeOf(signal));
}

/**
 * Removes `dir` and all in it, unless something is mounted at or below it:
 * then it fails and names the mounts. The runtime's module loads only here:
 * the helper processes that import this file for its signals stay small.
 */
export async function removeUnmounted(dir) {
  const { mountPoints } = await import('@paddock/runtime');
  const root = resolve(dir);
  const mounted = [...mountPoints()].filter((mp) => mp === root || mp.startsWith(root + '/'));
  if (mounted.length) throw new Error(`left ${dir} in place: ${mounted.length} mount(s) below it (${mounted.join(', ')})`);
  rmSync(dir, { recursive: true, force: true });
}
