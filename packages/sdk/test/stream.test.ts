// openStream over a hand-made server stream: what closing does before and
// after the stream has ended, and the handshake bound.
import type { CallOptions } from '@connectrpc/connect';
import { openStream } from '../src/stream.js';
import { TimeoutError } from '../src/errors.js';

interface Probe {
  signal?: AbortSignal;
  finished: boolean;
}

/** A stream of `items`; after them it waits for the abort when `hang` is set. */
function source(items: number[], probe: Probe, hang = false) {
  return async function* (options: CallOptions): AsyncIterable<number> {
    probe.signal = options.signal;
    try {
      for (const i of items) yield i;
      if (hang) {
        await new Promise<void>((_, reject) => {
          if (options.signal!.aborted) reject(new Error('aborted'));
          options.signal!.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        });
      }
    } finally {
      probe.finished = true;
    }
  };
}

const settings = { requestTimeoutMs: 0, timeoutMs: 0, subject: 'other' as const };

test('closing a stream that has ended cancels nothing', async () => {
  const probe: Probe = { finished: false };
  const s = await openStream(source([1, 2], probe), (m) => m * 10, settings);
  expect(s.first).toBe(10);
  expect(await s.rest.next()).toEqual({ done: false, value: 20 });
  expect(await s.rest.next()).toEqual({ done: true, value: undefined });
  s.close();
  expect(probe.signal!.aborted).toBe(false);
  expect(probe.finished).toBe(true);
});

test('closing a stream under way aborts its call, which then ends', async () => {
  const probe: Probe = { finished: false };
  const s = await openStream(source([1], probe, true), (m) => m, settings);
  const next = s.rest.next();
  s.close();
  expect(probe.signal!.aborted).toBe(true);
  await expect(next).rejects.toThrow('aborted');
  expect(probe.finished).toBe(true);
});

test("the caller's signal closes the stream", async () => {
  const probe: Probe = { finished: false };
  const caller = new AbortController();
  const s = await openStream(source([1], probe, true), (m) => m, { ...settings, signal: caller.signal });
  caller.abort();
  await expect(s.rest.next()).rejects.toThrow('the call was aborted by its signal');
  expect(probe.finished).toBe(true);
});

test('no first message within requestTimeoutMs is a TimeoutError', async () => {
  const probe: Probe = { finished: false };
  await expect(openStream(source([], probe, true), (m) => m, { ...settings, requestTimeoutMs: 20 })).rejects.toThrow(TimeoutError);
  expect(probe.signal!.aborted).toBe(true);
});
