// Calls into a forked helper process over its IPC channel: the parent sends
// `{ id, op, arg }`, the child answers `{ id, value }` or `{ id, error }`. Used by
// the bench to run the server, and each SDK of the comparison, in processes
// of their own.
import { exitCodeOf, STOP_SIGNALS } from './interrupt.mjs';

/** What a call gets when the child exited before it answered. */
export class ChildExited extends Error {}

/**
 * Parent side. Resolves, once the child said it is ready, with the value it
 * sent then, `call(op, arg)`, `closed` (settles when the child has exited)
 * and `close()`, which calls the child's `close` and waits for it to exit.
 */
export function callsTo(child, name) {
  const pending = new Map();
  let nextId = 1;
  let exited = null;
  const closed = new Promise((resolve) => child.once('exit', resolve));
  return new Promise((resolveReady, rejectReady) => {
    child.on('message', (m) => {
      if (m.ready) {
        resolveReady({ ready: m.value, call, closed, close });
        return;
      }
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(new Error(`${name}: ${m.error}`));
      else p.resolve(m.value);
    });
    // A child that could not start (its 'exit' may never come), or a send
    // that failed without a callback: never an unhandled 'error' event.
    child.on('error', rejectReady);
    child.once('exit', (code, signal) => {
      exited = new ChildExited(`${name} exited (${signal ?? code})`);
      rejectReady(exited);
      for (const p of pending.values()) p.reject(exited);
      pending.clear();
    });
  });

  /** A child that a signal closed (see answerCalls) may exit before it answers; that is no failure here. */
  async function close() {
    try {
      await call('close');
    } catch (err) {
      if (!(err instanceof ChildExited)) throw err;
    }
    await closed;
  }

  function call(op, arg) {
    return new Promise((resolve, reject) => {
      // Its channel closes before 'exit' is seen: a child that a signal
      // closed is gone before this process hears it exited.
      if (exited || !child.connected) return reject(exited ?? new ChildExited(`${name} has gone`));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, op, arg }, (err) => {
        if (!err || !pending.delete(id)) return;
        reject(new ChildExited(`${name} has gone (${err.message})`));
      });
    });
  }
}

/**
 * Child side: answers calls with `ops[op](arg)`, then says it is ready with
 * `value`. `ops.close`, if given, runs once, also when the parent goes away
 * or a SIGINT or SIGTERM comes (a Ctrl-C reaches every process of the run at
 * once), and the process exits after it.
 */
export function answerCalls(ops, value) {
  let closing = null;
  const close = () => (closing ??= Promise.resolve(ops.close?.()));
  const closeAndExit = (code) =>
    void close()
      .catch((err) => process.stderr.write(`[bench] ${err.message}\n`))
      .finally(() => process.exit(code));
  for (const signal of STOP_SIGNALS) process.on(signal, () => closeAndExit(exitCodeOf(signal)));
  // A parent that went away meanwhile is no error here: 'disconnect' closes.
  const reply = (message, then = () => {}) => (process.connected ? process.send(message, () => then()) : then());
  process.on('message', async ({ id, op, arg }) => {
    try {
      if (op !== 'close' && !ops[op]) throw new Error(`unknown operation '${op}'`);
      const result = await (op === 'close' ? close() : ops[op](arg));
      reply({ id, value: result }, () => op === 'close' && process.exit(0));
    } catch (err) {
      reply({ id, error: err.message });
    }
  });
  process.once('disconnect', () => closeAndExit(0));
  reply({ ready: true, value });
}
