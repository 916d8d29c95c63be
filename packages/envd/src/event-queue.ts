// A queue between a producer (a process's output, a directory watch) and
// one client stream. It counts the bytes waiting in it so the producer can
// pause while a client reads slowly, which keeps memory bounded without
// dropping output that a client is reading.

import type { StreamEnds } from './stream-ends.js';

export const HIGH_WATER_BYTES = 512 * 1024;
export const LOW_WATER_BYTES = 64 * 1024;

/** Most bytes in one run of items that may be joined (what `join` puts into one item). */
export const MAX_JOINED_BYTES = 1024 * 1024;

/** Items taken together: never empty. */
type Run<T> = [T, ...T[]];

interface Item<T> {
  value: T;
  size: number;
}

/**
 * Joins items that wait next to each other into one, e.g. output chunks of
 * the same stream: a reader that fell behind then gets one message instead of
 * many, which saves a protocol frame and a round of work per chunk at every
 * hop to the client.
 */
export interface Joiner<T> {
  /** Whether `next` may follow `first` in one item. */
  joinable(first: T, next: T): boolean;
  join(values: T[]): T;
}

export class EventQueue<T> implements AsyncIterable<T> {
  private readonly items: Item<T>[] = [];
  private waiter: ((r: IteratorResult<Run<T>, undefined>) => void) | undefined;
  private failWaiter: ((err: unknown) => void) | undefined;
  private done = false;
  private error: unknown;
  private queued = 0;
  private keepaliveTimer: NodeJS.Timeout | undefined;

  /** Called when the queue drains below the low-water mark after being full. */
  onDrain: (() => void) | undefined;
  /** Called once when the queue is closed, by either side. */
  onClose: (() => void) | undefined;

  constructor(private readonly joiner?: Joiner<T>) {}

  get bytes(): number {
    return this.queued;
  }

  get full(): boolean {
    return this.queued >= HIGH_WATER_BYTES;
  }

  get closed(): boolean {
    return this.done;
  }

  push(value: T, size = 0): void {
    if (this.done) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = this.failWaiter = undefined;
      w({ value: [value], done: false });
      return;
    }
    this.items.push({ value, size });
    this.queued += size;
  }

  /** Ends the stream after the queued items; with an error, the reader gets it after them. */
  close(error?: unknown): void {
    if (this.done) return;
    this.done = true;
    this.error = error;
    this.stopKeepalive();
    if (this.waiter && this.items.length === 0) {
      const w = this.waiter;
      const f = this.failWaiter;
      this.waiter = this.failWaiter = undefined;
      if (error !== undefined && f) f(error);
      else w({ value: undefined, done: true });
    }
    this.onClose?.();
    this.onClose = undefined;
  }

  /** Pushes `make()` every `intervalMs` while the queue is open. */
  keepalive(intervalMs: number, make: () => T): void {
    this.stopKeepalive();
    if (!(intervalMs > 0) || this.done) return;
    this.keepaliveTimer = setInterval(() => this.push(make()), intervalMs);
  }

  private stopKeepalive(): void {
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = undefined;
  }

  /** The first item and those after it that the joiner allows with it. */
  private takeRun(): Run<T> | undefined {
    const first = this.items.shift();
    if (!first) return undefined;
    const values: Run<T> = [first.value];
    let size = first.size;
    while (this.joiner && this.items.length > 0) {
      const item = this.items[0]!;
      if (size + item.size > MAX_JOINED_BYTES || !this.joiner.joinable(first.value, item.value)) break;
      this.items.shift();
      values.push(item.value);
      size += item.size;
    }
    const wasFull = this.queued >= LOW_WATER_BYTES;
    this.queued -= size;
    if (wasFull && this.queued < LOW_WATER_BYTES) this.onDrain?.();
    return values;
  }

  private nextRun(): Promise<IteratorResult<Run<T>, undefined>> {
    const run = this.takeRun();
    if (run) return Promise.resolve({ value: run, done: false });
    if (this.done) {
      if (this.error !== undefined) {
        const err = this.error;
        this.error = undefined;
        return Promise.reject(err);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.waiter = resolve;
      this.failWaiter = reject;
    });
  }

  /** Stops reading: what waits is dropped and the queue closes. */
  private stop(): Promise<IteratorResult<never, undefined>> {
    this.items.length = 0;
    this.queued = 0;
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    const join = (run: Run<T>): T => (run.length === 1 ? run[0] : this.joiner!.join(run));
    return {
      next: () => this.nextRun().then((r) => (r.done ? r : { value: join(r.value), done: false })),
      return: () => this.stop(),
    };
  }
}

/**
 * The items of `queue` as one call's stream, until the queue ends or the
 * call is aborted: the client went away, or its deadline passed. An aborted
 * call ends with the abort's reason (connect's deadline_exceeded for a
 * deadline), after what was taken before it. The queue is closed either way.
 */
export async function* untilAborted<T>(queue: EventQueue<T>, signal: AbortSignal, ends?: StreamEnds): AsyncGenerator<T> {
  // Ending all streams (StreamEnds.end) stops this one too, with the reason as its error.
  const ending = ends?.begin();
  const stop = () => queue.close();
  signal.addEventListener('abort', stop);
  ending?.signal.addEventListener('abort', stop);
  try {
    if (signal.aborted || ending?.signal.aborted) queue.close();
    yield* queue;
    signal.throwIfAborted();
    ending?.signal.throwIfAborted();
  } finally {
    signal.removeEventListener('abort', stop);
    ending?.signal.removeEventListener('abort', stop);
    ending?.done();
    queue.close();
  }
}
