// Creates per second, per API key: a token bucket each, refilled at `rate`
// tokens a second up to `burst`. A create that finds its key's bucket empty
// is refused with how long until it would not be.

export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  /** `rate` tokens a second, at most `burst` saved up; a rate of 0 lets everything through. */
  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {}

  /** Takes a token of `key`'s bucket: 0 when there was one, else the milliseconds until there will be. */
  take(key: string, now = Date.now()): number {
    if (this.rate <= 0) return 0;
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.rate);
    b.at = now;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) / this.rate) * 1000);
  }
}
