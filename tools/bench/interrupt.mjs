// What a bench process makes on the host (containers, overlay mounts,
// temporary directories) must not outlive it when the run is stopped
// (Ctrl-C, `kill`); Node's default on SIGINT and SIGTERM is to end at once.
// Whatever makes such a thing registers its undoing and uses the function it
// gets back as its normal `close`:
//
//   const close = undoOnInterrupt(async () => { ...unmount, remove... });
//
// After `undoAllOnSignals()`, SIGINT and SIGTERM run every undoing not yet
// run, newest first, then end the process with 128 + the signal's number.
import { rmSync } from 'node:fs';
import { constants } from 'node:os';
import { resolve } from 'node:path';

export const STOP_SIGNALS = ['SIGINT', 'SIGTERM'];

/** The exit code of a process that ends because of `signal`, as a shell reports it. */
export const exitCodeOf = (signal) => 128 + constants.signals[signal];

const undos = new Set();
let unwinding = null;

/** Registers `fn` to run on interruption; returns a function that runs it once (later calls get the same promise). */
export function undoOnInterrupt(fn) {
  let done = null;
  const once = () => (done ??= Promise.resolve().then(fn).finally(() => undos.delete(once)));
  undos.add(once);
  return once;
}

export function undoAllOnSignals() {
  for (const signal of STOP_SIGNALS) process.on(signal, () => void (unwinding ??= unwind(signal)));
}

/** Null, or the promise of the undoing a signal started (it ends the process). */
export const interrupted = () => unwinding;

async function unwind(signal) {
  process.stderr.write(`[bench] ${signal}: removing what this run made before it ends\n`);
  // The stopped code fails wherever it was, often where nothing catches it;
  // such a failure must not end the process before the undoing is done.
  const report = (err) => process.stderr.write(`[bench] after ${signal}: ${err?.message ?? err}\n`);
  process.on('uncaughtException', report).on('unhandledRejection', report);
  // What the stopped code registers meanwhile is undone too.
  while (undos.size) await [...undos].at(-1)().catch((err) => process.stderr.write(`[bench] ${err.message}\n`));
  process.exit(exitCodeOf(signal));
}

/** Removes `dir` unless something is mounted at or below it; then it fails and names the mounts. */
export async function removeUnmounted(dir) {
  // Loaded here only: helper processes that import this file for its signals stay small.
  const { mountPoints } = await import('@paddock/runtime');
  const root = resolve(dir);
  const mounted = [...mountPoints()].filter((mp) => mp === root || mp.startsWith(root + '/'));
  if (mounted.length) throw new Error(`left ${dir} in place: ${mounted.length} mount(s) below it (${mounted.join(', ')})`);
  rmSync(dir, { recursive: true, force: true });
}
