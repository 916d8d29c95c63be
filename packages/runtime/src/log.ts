// What the runtime says about its own work. The runtime takes a logger in
// pino's shape (an object of fields, then the message), so a server passes
// its own and the lines land in its log, with the request id of the call that
// caused them. Without one, warnings and errors are process warnings, as
// before, and the rest is dropped.

/** The part of a pino logger the runtime writes to. */
export interface RuntimeLog {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

const warning = (fields: Record<string, unknown>, message: string): void => {
  const where = typeof fields.sandboxID === 'string' ? `sandbox '${fields.sandboxID}': ` : '';
  const why = fields.err instanceof Error ? `: ${fields.err.message}` : '';
  process.emitWarning(`${where}${message}${why}`);
};

/** The logger of a runtime given none. */
export const warningsOnly: RuntimeLog = { debug: () => undefined, info: () => undefined, warn: warning, error: warning };

/** Milliseconds since `start` (a performance.now()), rounded to a tenth. */
export function msSince(start: number): number {
  return Math.round((performance.now() - start) * 10) / 10;
}

/**
 * How long each step of one operation took, for a debug line that shows an
 * operator where a slow create spent its time. Each `end(step)` closes the
 * step that began at the previous one (or at the start); a step ended twice
 * adds up.
 */
export class Phases {
  private readonly started = performance.now();
  private last = this.started;
  /** Milliseconds per step, in the order they ended. */
  readonly ms: Record<string, number> = {};

  end(step: string): void {
    const now = performance.now();
    this.ms[step] = Math.round(((this.ms[step] ?? 0) + now - this.last) * 10) / 10;
    this.last = now;
  }

  /** Milliseconds since the start. */
  total(): number {
    return msSince(this.started);
  }
}
