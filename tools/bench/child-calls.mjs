// Calls into a forked helper process over its IPC channel: the parent sends
// `{ id, op, arg }`, the child answers `{ id, value }` or `{ id, error }`. Used by
// the bench to run the server, and each SDK of the comparison, in processes
// of their own.

/**
 * Parent side. Resolves, once the child said it is ready, with the value it
 * sent then, `call(op, arg)` and `closed` (settles when the child has exited).
 */
export function callsTo(child, name) {
  const pending = new Map();
  let nextId = 1;
  let exited = null;
  const closed = new Promise((resolve) => child.once('exit', resolve));
  return new Promise((resolveReady, rejectReady) => {
    child.on('message', (m) => {
      if (m.ready) {
        resolveReady({ ready: m.value, call, closed });
        return;
      }
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(new Error(`${name}: ${m.error}`));
      else p.resolve(m.value);
    });
    child.once('exit', (code, signal) => {
      exited = new Error(`${name} exited (${signal ?? code})`);
      rejectReady(exited);
      for (const p of pending.values()) p.reject(exited);
      pending.clear();
    });
  });

  function call(op, arg) {
    return new Promise((resolve, reject) => {
      if (exited) return reject(exited);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, op, arg });
    });
  }
}

/**
 * Child side: answers calls with `ops[op](arg)`, then says it is ready with
 * `value`. `ops.close`, if given, runs once, also when the parent goes away,
 * and the process exits after it.
 */
export function answerCalls(ops, value) {
  let closing = null;
  const close = () => (closing ??= Promise.resolve(ops.close?.()));
  process.on('message', async ({ id, op, arg }) => {
    try {
      if (op !== 'close' && !ops[op]) throw new Error(`unknown operation '${op}'`);
      const result = await (op === 'close' ? close() : ops[op](arg));
      process.send({ id, value: result }, () => op === 'close' && process.exit(0));
    } catch (err) {
      process.send({ id, error: err.message });
    }
  });
  process.once('disconnect', () => void close().finally(() => process.exit(0)));
  process.send({ ready: true, value });
}
