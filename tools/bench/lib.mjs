// Measuring helpers shared by the benchmark suites. Benchmarks report
// ratios to a baseline measured in the same run; absolute numbers are
// printed for context, never asserted.
import { cpus, totalmem, release } from 'node:os';

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), min: sorted[0], max: sorted.at(-1) };
}

/** Runs `fn` `warmup` times unmeasured, then `iterations` times; returns ms per run. */
export async function timeit(fn, { warmup = 3, iterations = 20 } = {}) {
  for (let i = 0; i < warmup; i++) await fn(i);
  const samples = [];
  for (let i = 0; i < iterations; i++) {
    const t = performance.now();
    await fn(i);
    samples.push(performance.now() - t);
  }
  return summarize(samples);
}

/** Like timeit, but each run returns a byte count; returns MiB/s per run. */
export async function throughput(fn, opts = {}) {
  const rates = [];
  const { warmup = 1, iterations = 3 } = opts;
  for (let i = 0; i < warmup; i++) await fn(i);
  for (let i = 0; i < iterations; i++) {
    const t = performance.now();
    const bytes = await fn(i);
    rates.push(bytes / (1024 * 1024) / ((performance.now() - t) / 1000));
  }
  // For rates, "p50" is the median rate and "p95" the 5th percentile (slow end).
  const sorted = [...rates].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 5), min: sorted[0], max: sorted.at(-1) };
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
 */
export function row({ suite, name, unit, value, baseline, baselineName, lowerIsBetter = true, target, note }) {
  const ratio = baseline ? value.p50 / baseline.p50 : null;
  let met = null;
  if (target) {
    const v = target.on === 'ratio' ? ratio : value.p50;
    met = v === null ? null : target.op === '<=' ? v <= target.value : v >= target.value;
  }
  return { suite, name, unit, value, baseline: baseline ?? null, baselineName: baselineName ?? null, ratio, lowerIsBetter, target: target ?? null, met, note: note ?? null };
}
