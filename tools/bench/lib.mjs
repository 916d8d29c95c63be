// Measuring helpers shared by the benchmark suites. Benchmarks report
// ratios to a baseline measured in the same run; absolute numbers are
// printed for context, never asserted.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { cpus, totalmem, release } from 'node:os';
import { PerformanceObserver, constants as perf } from 'node:perf_hooks';

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** Four significant digits: what latest.json keeps of each sample. */
const sig4 = (x) => Number(x.toPrecision(4));

/** `samples` are kept as taken (in latest.json), so that a subject's and its baseline's line up pair by pair. */
export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), min: sorted[0], max: sorted.at(-1), samples: samples.map(sig4) };
}

const MiB = 1024 * 1024;

/**
 * The node options of every process the bench starts for its own side (the
 * suites' clients, the baselines, the SDK workloads); the server and envd
 * start with theirs, as users run them. With V8's default limits a small
 * process that streams MiBs lands, at random, in one of two states: a full
 * mark every 10 to 20 MiB of fresh buffers, or almost none (see the sdk
 * README). Which one a client fell into decided rows that had nothing else
 * in common from run to run: the SDK's 256 MiB read was 0.65 to 0.74 of
 * loopback in runs with 75 to 141 full GCs and 1.5 to 1.7 in runs with 0 to
 * 18, over the same 21 pairs. A fixed initial heap leaves one state, the one
 * the sdk README recommends for programs that stream, as benchmarks of a
 * JVM fix its heap. The local baselines did not move with it: loopback TCP
 * and the pipe, alternated in two processes with and without it, differed
 * by 1 to 8%, up in one run and down in the other.
 */
export const benchNodeFlags = ['--initial-old-space-size=64'];

/**
 * One run of `fn`: its wall time here, and how much it did (`amount`: what
 * it resolved with). A run in the baseline process resolves with
 * `{ elapsedMs, bytes }`, timed over there: that time counts instead, as the
 * round trip to that process is not the work. A run that times itself, to
 * leave out what it does after (removing what it made), resolves with
 * `{ elapsedMs, count }`.
 */
async function run(fn, i) {
  const t = performance.now();
  const result = await fn(i);
  const elapsedMs = performance.now() - t;
  if (typeof result?.elapsedMs !== 'number') return { elapsedMs, amount: result };
  return { elapsedMs: result.elapsedMs, amount: result.bytes ?? result.count };
}

/**
 * Runs `work` (which resolves with a byte count) and resolves with
 * `{ elapsedMs, bytes }`: what a helper process answers, so that the
 * caller counts the work's own time, not the round trip to the helper.
 */
export async function timedHere(work) {
  const t = performance.now();
  const bytes = await work();
  return { elapsedMs: performance.now() - t, bytes };
}

async function timed(fn, i) {
  return (await run(fn, i)).elapsedMs;
}

async function rated(fn, i) {
  return (await perSecond(fn, i)) / MiB;
}

async function perSecond(fn, i) {
  const { elapsedMs, amount } = await run(fn, i);
  if (typeof amount !== 'number') throw new Error(`a rate's run resolved with ${JSON.stringify(amount)}, not how much it did (a number, or { elapsedMs, bytes | count })`);
  return amount / (elapsedMs / 1000);
}

// For rates, "p50" is the median rate and "p95" the 5th percentile (the slow end).
export function summarizeRates(rates) {
  const sorted = [...rates].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 5), min: sorted[0], max: sorted.at(-1), samples: rates.map(sig4) };
}

async function measure(fn, { warmup, iterations }, sample) {
  for (let i = 0; i < warmup; i++) await fn(i);
  const samples = [];
  for (let i = 0; i < iterations; i++) samples.push(await sample(fn, i));
  return samples;
}

/**
 * Measures a subject and its baselines in alternation (A B, B A, A B, ...;
 * with two baselines A B C, C B A, ...), so that the slow and fast moments of
 * a shared machine fall on all of them alike: their ratios, the headline,
 * then hold still from one run to the next far better than when each is
 * measured in a block of its own. A baseline given as `{ fn, every }` runs
 * only in every `every`-th round (the first, then every `every` rounds), for
 * one that costs too much to run in each; an odd `every` puts it on both
 * sides of the order. One given as `{ fn, repeat }` runs `repeat` times in
 * each of its rounds, and the median of those is the round's sample: for a
 * baseline far cheaper than its subject whose single runs spread more (a
 * spawn of `true`, 2 to 8 ms, next to a create of 20 ms), so that its spread
 * is not most of the pair's. Everything runs `warmup` times first. Gives,
 * for each, its samples in order and the rounds they were taken in.
 */
async function alternate(fns, { warmup, iterations }, sample) {
  const entries = fns.map((f) => ({ every: 1, repeat: 1, ...(typeof f === 'function' ? { fn: f } : f) }));
  for (let i = 0; i < warmup; i++) for (const e of entries) await e.fn(i);
  const out = entries.map(() => ({ samples: [], rounds: [] }));
  const order = entries.map((_, k) => k);
  for (let i = 0; i < iterations; i++) {
    for (const k of i % 2 ? [...order].reverse() : order) {
      if (i % entries[k].every) continue;
      const taken = [];
      for (let r = 0; r < entries[k].repeat; r++) taken.push(await sample(entries[k].fn, i));
      out[k].samples.push(median(taken.sort((a, b) => a - b)));
      out[k].rounds.push(i);
    }
  }
  return out;
}

/** Runs `fn` `warmup` times unmeasured, then `iterations` times; returns ms per run. */
export async function timeit(fn, { warmup = 3, iterations = 20 } = {}) {
  return summarize(await measure(fn, { warmup, iterations }, timed));
}

/** Like timeit, but each run returns a byte count; returns MiB/s per run. */
export async function throughput(fn, { warmup = 1, iterations = 3 } = {}) {
  return summarizeRates(await measure(fn, { warmup, iterations }, rated));
}

/**
 * How a row's ratio is taken, by its baseline's summary: `{ subject, ratio,
 * interval }`. For a subject measured in alternation with its baseline
 * (`paired`), the median of the ratios of the samples taken next to each
 * other: a slow or fast stretch of the machine falls on both samples of a
 * pair and cancels in their ratio, where in the ratio of the two medians it
 * does so only as far as the medians happen to come from the same stretch.
 * For one whose baseline was taken in the same stretches but not sample by
 * sample next to it (`byMedians`), the quotient of the two medians.
 */
const ratios = new WeakMap();

/** The middle of `sorted`; with an even count, the mean of the two middle values. */
export function median(sorted) {
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * A 95% confidence interval for the median of the population `sorted`
 * (ascending) was drawn from, free of any assumption about its shape: the
 * j-th smallest and j-th largest sample, for the largest j such that the
 * median lies between them with probability at least 0.95 (the count of
 * samples below it is binomial, n and 1/2). Null for fewer than 6 samples,
 * where even the smallest and the largest cover less.
 */
export function medianInterval(sorted) {
  const n = sorted.length;
  // P(X <= k) for X ~ Bin(n, 1/2), summed in log space: 2^-n underflows past n = 1074.
  let logP = -n * Math.LN2;
  let below = 0; // P(X <= j - 1)
  let j = 0;
  for (let k = 0; k < n / 2; k++) {
    const next = below + Math.exp(logP);
    if (2 * next > 0.05) break;
    below = next;
    j = k + 1;
    logP += Math.log((n - k) / (k + 1));
  }
  return j === 0 ? null : [sorted[j - 1], sorted[n - j]];
}

/** Pairs each of `b`'s samples with `a`'s of the same round (`rounds`, as alternate gives them). */
function paired(subjectSummary, baselineSummary, a, b, rounds) {
  const each = b.map((y, i) => a[rounds[i]] / y).sort((x, y) => x - y);
  ratios.set(baselineSummary, { subject: subjectSummary, ratio: median(each), interval: medianInterval(each) });
  return baselineSummary;
}

/**
 * Makes the ratio of `subject` to `baseline` (two summaries, of samples
 * taken in the same stretches of the run but not next to each other one by
 * one) the quotient of their medians, with a 95% interval from the two
 * medians' own (medianInterval), taken as independent errors on a log
 * scale: the ratio's low end lies as far below it as the subject's low end
 * and the baseline's high end do, added in quadrature, and its high end
 * likewise. No interval when either has too few samples for one. Returns
 * `baseline`, for row().
 */
export function byMedians(subject, baseline) {
  const interval = (s) => medianInterval([...s.samples].sort((x, y) => x - y));
  const [a, b] = [interval(subject), interval(baseline)];
  const ratio = subject.p50 / baseline.p50;
  let both = null;
  if (a && b) {
    const below = Math.hypot(Math.log(subject.p50 / a[0]), Math.log(b[1] / baseline.p50));
    const above = Math.hypot(Math.log(a[1] / subject.p50), Math.log(baseline.p50 / b[0]));
    both = [ratio / Math.exp(below), ratio * Math.exp(above)];
  }
  ratios.set(baseline, { subject, ratio, interval: both });
  return baseline;
}

/** timeit of a subject and its baseline, alternated; returns [subject, baseline]. */
export async function timePair(subject, baseline, { warmup = 3, iterations = 20 } = {}) {
  const blocks = timeInBlocks(subject, [baseline]);
  await blocks.take({ warmup, iterations });
  return blocks.result();
}

/**
 * timePair with several baselines (each a function or `{ fn, every, repeat }`, as for
 * alternate, and paired with the subject's samples of the rounds it ran in),
 * in blocks taken at different moments of a suite with `take` and summarized
 * together by `result`, which returns [subject, ...baselines]. A block taken
 * in one stretch of seconds shares that stretch's machine: at the start of a
 * run 20 cold creates in a row read 250 to 350 ms, and the next 25 170 to
 * 260.
 */
export function timeInBlocks(subject, baselines) {
  return inBlocks([subject, ...baselines], timed, summarize);
}

/** timeInBlocks for rates: each run returns a byte count, and the samples are MiB/s (as throughput's). */
export function throughputInBlocks(subject, baselines) {
  return inBlocks([subject, ...baselines], rated, summarizeRates);
}

function inBlocks(fns, sample, summary) {
  const samples = fns.map(() => []);
  // The round of each sample, counted over all blocks (the subject runs in every round).
  const rounds = fns.map(() => []);
  return {
    async take({ warmup, iterations }) {
      const before = samples[0].length;
      const got = await alternate(fns, { warmup, iterations }, sample);
      got.forEach((g, k) => {
        samples[k].push(...g.samples);
        rounds[k].push(...g.rounds.map((r) => before + r));
      });
    },
    result() {
      const [a, ...bs] = samples;
      const s = summary(a);
      return [s, ...bs.map((b, k) => paired(s, summary(b), a, b, rounds[k + 1]))];
    },
  };
}

/**
 * timeInBlocks for rates of things other than bytes: each run resolves with
 * how many it did (sandboxes, say), and the samples are that many a second.
 */
export function ratesInBlocks(subject, baselines) {
  return inBlocks([subject, ...baselines], perSecond, summarizeRates);
}

/** throughput of a subject and its baseline, alternated; returns [subject, baseline]. */
export async function throughputPair(subject, baseline, opts) {
  return throughputAlternated(subject, [baseline], opts);
}

/**
 * throughputPair with several baselines, each a function or `{ fn, every, repeat }`
 * (see alternate); returns [subject, ...baselines], each baseline paired with
 * the subject's samples of the rounds it ran in.
 */
export async function throughputAlternated(subject, baselines, { warmup = 1, iterations = 3 } = {}) {
  const blocks = throughputInBlocks(subject, baselines);
  await blocks.take({ warmup, iterations });
  return blocks.result();
}

/**
 * A full collection now, for a sample to call once its timing has stopped,
 * so that the next starts without its garbage. Needs node's --expose-gc,
 * which the suite processes start with (suite-process.mjs).
 */
export function collectGarbage() {
  if (typeof globalThis.gc !== 'function') throw new Error('collectGarbage needs node --expose-gc (the bench starts its suites with it)');
  globalThis.gc();
}

/**
 * Counts this process's full (mark-compact) collections until `stop()`,
 * which gives `{ count, ms }`. A client streaming MiBs through a small heap
 * can fall into a full mark every 10 to 20 MiB or not, run by run (see the
 * sdk README), and that moves its rows; the count says which it was.
 */
export function fullGcs() {
  let count = 0;
  let ms = 0;
  const take = (entries) => {
    for (const e of entries) {
      if (e.detail?.kind !== perf.NODE_PERFORMANCE_GC_MAJOR) continue;
      count++;
      ms += e.duration;
    }
  };
  const observer = new PerformanceObserver((list) => take(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop() {
      take(observer.takeRecords());
      observer.disconnect();
      return { count, ms };
    },
  };
}

/**
 * Sends `size` bytes over loopback TCP from one socket to another in this
 * process, in 1 MiB writes; resolves with `size` once the receiver saw the end.
 */
export async function loopbackTcp(size) {
  const server = createServer((sock) => sock.resume());
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const chunk = Buffer.alloc(MiB);
  const done = new Promise((resolve) => server.once('connection', (sock) => sock.once('end', resolve)));
  const client = connect(server.address().port, '127.0.0.1');
  await new Promise((r) => client.once('connect', r));
  for (let sent = 0; sent < size; sent += chunk.length) {
    if (!client.write(chunk)) await new Promise((r) => client.once('drain', r));
  }
  client.end();
  await done;
  server.close();
  return size;
}

/**
 * Waits until what earlier writes left dirty is on disk (sync(1)). A phase
 * that writes hundreds of MiB leaves the kernel writing them back for
 * seconds after; a phase measured meanwhile shares the two cores and the
 * disk with that writeback, and reads of 256 MiB swung between two speeds
 * from one run to the next.
 */
export function settleDisk() {
  execFileSync('sync');
}

let pageSize;

/**
 * Bytes the kernel holds in its per-CPU free lists, over all zones (the
 * `count:` lines of /proc/zoneinfo, in pages): free to use, but counted in
 * neither MemFree nor MemAvailable. They fill when much is freed at once
 * and drain over about ten seconds (probes/idle-memory.mjs).
 */
export function perCpuFreeBytes() {
  pageSize ??= Number(execFileSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }));
  let pages = 0;
  for (const m of readFileSync('/proc/zoneinfo', 'utf8').matchAll(/^\s+count:\s+(\d+)/gm)) pages += Number(m[1]);
  return pages * pageSize;
}

/**
 * How contended the CPUs were while a suite ran, read from /proc:
 * `stealPct`, the share of CPU time the hypervisor gave to other machines
 * (the `steal` column of /proc/stat), and `waitPct`, the share of wall time
 * in which some runnable task, ours included, waited for a CPU (PSI,
 * /proc/pressure/cpu "some"). Each is null where the kernel does not report it.
 */
export function loadSnapshot() {
  const stat = readProc('/proc/stat')?.split('\n', 1)[0]?.trim().split(/\s+/).slice(1).map(Number);
  const psi = /^some .*total=(\d+)/m.exec(readProc('/proc/pressure/cpu') ?? '');
  return {
    at: performance.now(),
    // user nice system idle iowait irq softirq steal (guest time is counted in user already)
    total: stat && stat.length >= 8 ? stat.slice(0, 8).reduce((a, b) => a + b, 0) : null,
    steal: stat && stat.length >= 8 ? stat[7] : null,
    waitUs: psi ? Number(psi[1]) : null,
  };
}

export function loadSince(before) {
  const now = loadSnapshot();
  const ticks = now.total !== null && before.total !== null ? now.total - before.total : 0;
  const wallUs = (now.at - before.at) * 1000;
  return {
    seconds: (now.at - before.at) / 1000,
    stealPct: ticks > 0 ? (100 * (now.steal - before.steal)) / ticks : null,
    waitPct: now.waitUs !== null && before.waitUs !== null && wallUs > 0 ? (100 * (now.waitUs - before.waitUs)) / wallUs : null,
  };
}

function readProc(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const speedInput = Buffer.alloc(4 * MiB, 0x5a);

/**
 * How fast this CPU runs now, in MiB/s of SHA-256 on one thread: the median
 * of five hashes of 4 MiB, about 20 ms. Steal does not show everything that
 * slows this machine: a busy loop of such hashes, with steal at 0 to 2%, ran
 * at 913 to 1254 MiB/s from one second to the next over 40 s, and at 623 to
 * 1201 when it idled a second between hashes. The suites take one of these
 * at each line of their log (the start of a phase, mostly), so that a run
 * says how fast its CPUs were (`cpuSpeedSummary`), and a comparison how far
 * that moved between two runs.
 */
export function cpuSpeed() {
  const rates = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    createHash('sha256').update(speedInput).digest();
    rates.push(speedInput.length / MiB / ((performance.now() - t) / 1000));
  }
  return percentile(rates.sort((a, b) => a - b), 50);
}

/** The median, lowest and highest of a suite's `cpuSpeed` samples, or null when it took none. */
export function cpuSpeedSummary(samples) {
  if (samples.length === 0) return null;
  const { n, p50, min, max } = summarize(samples);
  return { n, p50, min, max };
}

export function machine() {
  const c = cpus();
  return {
    cpus: c.length,
    cpuModel: c[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kernel: release(),
  };
}

/**
 * A result row. `lowerIsBetter` for latencies (ratio = paddock / baseline),
 * false for throughputs (ratio = paddock / baseline too, higher is better).
 * For a subject measured in alternation with its baseline, `ratio` is the
 * median of the paired ratios and `ratioInterval` its 95% confidence
 * interval (medianInterval); for one given to byMedians, the quotient of the
 * medians and its interval from theirs. `ratioOfMedians` (the quotient of
 * the two p50s) is kept next to it in the raw numbers.
 */
export function row({ suite, name, unit, value, baseline, baselineName, lowerIsBetter = true, target, note }) {
  const pair = baseline && ratios.get(baseline);
  const ratioOfMedians = baseline ? value.p50 / baseline.p50 : null;
  const ownPair = pair?.subject === value;
  const ratio = ownPair ? pair.ratio : ratioOfMedians;
  let met = null;
  if (target) {
    const v = target.on === 'ratio' ? ratio : value.p50;
    met = v === null ? null : target.op === '<=' ? v <= target.value : v >= target.value;
  }
  const ratioInterval = ownPair ? pair.interval : null;
  return { suite, name, unit, value, baseline: baseline ?? null, baselineName: baselineName ?? null, ratio, ratioInterval, ratioOfMedians, lowerIsBetter, target: target ?? null, met, note: note ?? null };
}
