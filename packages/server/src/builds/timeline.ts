// How long the parts of a build step took, for its log: users see where a
// slow build spends its time, and the server log keeps the same in numbers.

/** Durations of named parts, each from the previous mark (or the start) to its own. */
export class Timeline {
  private last = performance.now();
  private readonly start = this.last;
  private readonly parts: Array<[string, number]> = [];

  /** Ends the part `name` now. */
  mark(name: string): void {
    const now = performance.now();
    this.parts.push([name, now - this.last]);
    this.last = now;
  }

  /** Adds parts measured elsewhere, `ms` long in all, ending now. */
  add(parts: Record<string, number | undefined>): void {
    for (const [name, ms] of Object.entries(parts)) if (ms !== undefined) this.parts.push([name, ms]);
    this.last = performance.now();
  }

  /** The parts in whole ms, and the total, for a log line. */
  ms(): Record<string, number> {
    return { ...Object.fromEntries(this.parts.map(([n, ms]) => [`${n}Ms`, Math.round(ms)])), totalMs: Math.round(this.last - this.start) };
  }

  /** `1.23 s (container 0.70 s, step 0.31 s)`: the total and each part. */
  summary(): string {
    const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
    return `${s(this.last - this.start)} (${this.parts.map(([n, ms]) => `${n} ${s(ms)}`).join(', ')})`;
  }
}
