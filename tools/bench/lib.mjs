// Measuring helpers shared by the suites. Every row is a subject next to a
// baseline measured in the same run, and its headline is their ratio:
// absolute numbers depend on the machine and are printed for context only.
import { execFileSync } from 'node:child_process';
import { connect, createServer } from 'node:net';

export const MiB = 1024 * 1024;

/**
 * The node options of the processes the bench starts for its own side
 * (suites, baselines, SDK workloads): a fixed initial heap, as the sdk README
 * recommends for programs that stream, so that whether a client falls into
 * frequent full GCs does not pick a row's value at random.
 */
export const benchNodeFlags = ['--initial-old-space-size=64'];

/** The `p`-th percentile of `sorted` (ascending), by rank. */
export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/**
 * The median and the slow end of `samples`: for times the 90th percentile,
 * for rates (higher is better) the 10th.
 */
export function summarize(samples, { rate = false } = {}) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p90: percentile(sorted, rate ? 10 : 90), samples };
}

/**
 * How long one call of `fn` took, in ms, and how much it did. `fn` resolves
 * with nothing, with a byte count, or with `{ ms, bytes | count }` when it
 * timed itself: in a helper process (the round trip there is not the work),
 * or to leave out what it does afterwards (removing what it made).
 */
async function once(fn) {
  const t = performance.now();
  const r = await fn();
  const ms = typeof r?.ms === 'number' ? r.ms : performance.now() - t;
  const amount = typeof r === 'number' ? r / MiB : r?.bytes !== undefined ? r.bytes / MiB : r?.count;
  return { ms, amount };
}

/** Runs `work` (resolving with a byte count) and resolves with `{ ms, bytes }`, for helper processes. */
export async function timedHere(work) {
  const t = performance.now();
  const bytes = await work();
  return { ms: performance.now() - t, bytes };
}

/**
 * A subject and its baselines (`fns[0]`, `fns[1..]`), run in alternation (A B,
 * B A, ...) so that the slow and fast moments of a shared machine fall on all
 * of them alike. A baseline given as `{ fn, every }` runs in every `every`-th
 * round only, for one that costs too much to run in each. `take` may be called
 * several times (a suite spreads a row's samples over passes); `result()`
 * gives a summary per function, in ms, or with `rate` in MiB (or count) a
 * second.
 */
export function alternate(fns, { rate = false } = {}) {
  const entries = fns.map((f) => (typeof f === 'function' ? { fn: f, every: 1 } : f));
  const samples = entries.map(() => []);
  let round = 0;
  return {
    async take({ warmup = 1, iterations }) {
      for (let i = 0; i < warmup; i++) for (const e of entries) await e.fn();
      for (let i = 0; i < iterations; i++, round++) {
        const order = entries.map((_, k) => k);
        for (const k of round % 2 ? order.reverse() : order) {
          if (round % entries[k].every) continue;
          const { ms, amount } = await once(entries[k].fn);
          if (rate && typeof amount !== 'number') throw new Error(`a rate's run resolved without how much it did (a byte count, or { ms, bytes | count })`);
          samples[k].push(rate ? amount / (ms / 1000) : ms);
        }
      }
    },
    result: () => samples.map((s) => summarize(s, { rate })),
  };
}

/** One alternation taken in one go: resolves with [subject, ...baselines]. */
export async function pair(fns, { warmup, iterations, rate }) {
  const a = alternate(fns, { rate });
  await a.take({ warmup, iterations });
  return a.result();
}

/**
 * Starts `count` of `make()` at once and waits for all. On a loaded host some
 * may fail (a sandbox whose envd boots too slowly): what was made is still
 * given, for the caller to count and remove, with the failures beside it.
 */
export async function allAtOnce(count, make) {
  const settled = await Promise.allSettled(Array.from({ length: count }, make));
  return { made: settled.filter((s) => s.status === 'fulfilled').map((s) => s.value), failed: settled.filter((s) => s.status === 'rejected').map((s) => s.reason) };
}

/** What a row says of the `failed` among `total` (errors), or undefined when none failed. */
export const failures = (failed, total) => (failed.length ? `${failed.length} of ${total} failed: ${failed[0]?.message ?? failed[0]}` : undefined);

/**
 * A result row. `value` and `baseline` are summaries; the ratio is Paddock's
 * p50 over the baseline's, for times and rates alike (lower is better for
 * times, higher for rates). `target` ({ on: 'ratio' | 'value', op, value })
 * is checked on the ratio or on Paddock's own p50. `failed` says what failed
 * among the row's attempts (see allAtOnce).
 */
export function row({ suite, name, unit, value, baseline, baselineName, target, failed }) {
  const ratio = baseline ? value.p50 / baseline.p50 : null;
  const judged = target?.on === 'ratio' ? ratio : value.p50;
  const met = target ? (target.op === '<=' ? judged <= target.value : judged >= target.value) : null;
  return { suite, name, unit, value, baselineName: baselineName ?? null, baseline: baseline ?? null, ratio, target: target ?? null, met, failed: failed ?? null };
}

/**
 * Sends `size` bytes over loopback TCP from one socket to another in this
 * process, in 1 MiB writes; resolves with `size` once the receiver saw the end.
 */
export async function loopbackTcp(size) {
  const server = createServer((sock) => sock.resume());
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const done = new Promise((resolve) => server.once('connection', (sock) => sock.once('end', resolve)));
  const client = connect(server.address().port, '127.0.0.1');
  await new Promise((r) => client.once('connect', r));
  const chunk = Buffer.alloc(MiB);
  for (let sent = 0; sent < size; sent += chunk.length) {
    if (!client.write(chunk)) await new Promise((r) => client.once('drain', r));
  }
  client.end();
  await done;
  server.close();
  return size;
}

/**
 * Waits until earlier writes are on disk, so that a phase does not share the
 * two cores with the kernel's writeback of the phase before.
 */
export function settleDisk() {
  execFileSync('sync');
}

/**
 * Pairs the sample that waits for an event with the event: `expect(name)`
 * resolves once `saw(name)` is called, and rejects once `end(err)` was (the
 * stream of events ended), also for samples that start after.
 */
export function eventWaiter() {
  let waiting = null;
  let ended = null;
  return {
    expect: (name) => new Promise((resolve, reject) => (ended ? reject(ended) : (waiting = { name, resolve, reject }))),
    saw: (name) => name === waiting?.name && waiting.resolve(),
    end: (err) => waiting?.reject((ended = err)),
  };
}

/** A stack of closings, run newest first; every one runs, and the first failure is thrown after. */
export function closings() {
  const stack = [];
  return {
    add(fn) {
      stack.push(fn);
      return fn;
    },
    async run() {
      const failures = [];
      while (stack.length) await Promise.resolve().then(stack.pop()).catch((err) => failures.push(err));
      if (failures.length) throw failures[0];
    },
  };
}
