// The measuring helpers of tools/bench/lib.mjs that pair a subject's samples
// with its baseline's: what a run reports it did, how long it took, and how
// the row's ratio comes out of the pairs. No service is started.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Summary {
  n: number;
  p50: number;
  samples: number[];
}
interface Blocks {
  take(opts: { warmup: number; iterations: number }): Promise<void>;
  result(): Summary[];
}
type Run = () => Promise<number | { elapsedMs: number; count?: number; bytes?: number }>;
interface LibModule {
  ratesInBlocks(subject: Run, baselines: Run[]): Blocks;
  summarizeRates(rates: number[]): Summary;
  byMedians(subject: Summary, baseline: Summary): Summary;
  row(opts: { suite: string; name: string; unit: string; value: Summary; baseline: Summary; baselineName: string; lowerIsBetter: boolean }): {
    ratio: number;
    ratioInterval: [number, number] | null;
    ratioOfMedians: number;
  };
}

const root = fileURLToPath(new URL('../../..', import.meta.url));
const libPath = join(root, 'tools/bench/lib.mjs');
let lib: LibModule;
beforeAll(async () => {
  lib = (await import(pathToFileURL(libPath).href)) as LibModule;
});

/** A run that reports it did `count` things in each of `ms`, one call after the other. */
function timedRuns(count: number, ms: number[]): Run {
  let call = 0;
  return async () => ({ elapsedMs: ms[call++]!, count });
}

test('ratesInBlocks pairs each sample with the baseline of its round, over all blocks taken', async () => {
  // Subject rates 10, 20, 40, 80 a second; baseline 20, 10, 80, 160, in two blocks of two
  // rounds. Paired round by round, the ratios are 0.5, 2, 0.5 and 0.5. Were the second block's
  // baseline paired with the first block's subject samples (its rounds counted from 0 again),
  // they would be 0.5, 2, 0.125 and 0.125; and the quotient of the two medians is 1.
  const blocks = lib.ratesInBlocks(timedRuns(20, [2000, 1000, 500, 250]), [timedRuns(10, [500, 1000, 125, 62.5])]);
  await blocks.take({ warmup: 0, iterations: 2 });
  await blocks.take({ warmup: 0, iterations: 2 });
  const [subject, baseline] = blocks.result();
  expect(subject!.samples).toEqual([10, 20, 40, 80]);
  expect(baseline!.samples).toEqual([20, 10, 80, 160]);
  const r = lib.row({ suite: 'sdk', name: 'batches', unit: 'sandboxes/s', value: subject!, baseline: baseline!, baselineName: 'runs', lowerIsBetter: false });
  expect(r.ratio).toBeCloseTo(0.5);
  expect(r.ratioOfMedians).toBeCloseTo(1);
});

test('byMedians makes the ratio the quotient of the medians, its interval from both of theirs', () => {
  // Subject 1..12 (median 6.5 interpolated, p50 6 by rank); its 95% interval is the 3rd and
  // 10th of 12, 3 and 10. Baseline 10, 20, ..., 120: p50 60, interval 30 and 100.
  const twelve = Array.from({ length: 12 }, (_, i) => i + 1);
  const subject = lib.summarizeRates(twelve);
  const baseline = lib.byMedians(subject, lib.summarizeRates(twelve.map((x) => 10 * x)));
  const r = lib.row({ suite: 'sdk', name: 'batches', unit: 'sandboxes/s', value: subject, baseline, baselineName: 'runs', lowerIsBetter: false });
  expect(r.ratio).toBeCloseTo(0.1);
  // Low end: the subject's low (3 against 6) and the baseline's high (100 against 60), in quadrature on a log scale.
  const below = Math.hypot(Math.log(6 / 3), Math.log(100 / 60));
  const above = Math.hypot(Math.log(10 / 6), Math.log(60 / 30));
  expect(r.ratioInterval![0]).toBeCloseTo(0.1 / Math.exp(below));
  expect(r.ratioInterval![1]).toBeCloseTo(0.1 * Math.exp(above));
  // Wider than either median's interval alone.
  expect(r.ratioInterval![0]).toBeLessThan(0.1 * (3 / 6));
  expect(r.ratioInterval![1]).toBeGreaterThan(0.1 * (10 / 6));
});

test('byMedians gives no interval when a side has too few samples for one', () => {
  const subject = lib.summarizeRates([1, 2, 3, 4, 5]);
  const baseline = lib.byMedians(subject, lib.summarizeRates([10, 20, 30, 40, 50, 60, 70]));
  const r = lib.row({ suite: 'sdk', name: 'batches', unit: 'sandboxes/s', value: subject, baseline, baselineName: 'runs', lowerIsBetter: false });
  expect(r.ratio).toBeCloseTo(3 / 40);
  expect(r.ratioInterval).toBeNull();
});

test('a run that resolves with a plain count is timed where it runs', async () => {
  const blocks = lib.ratesInBlocks(
    async () => {
      await new Promise((r) => setTimeout(r, 50));
      return 5;
    },
    [timedRuns(5, [100])],
  );
  const t = performance.now();
  await blocks.take({ warmup: 0, iterations: 1 });
  const wallSeconds = (performance.now() - t) / 1000;
  const [subject, baseline] = blocks.result();
  // Timed around the run alone, which took no longer than the whole take (50 ms or more):
  // 5 in that time is at least 5 / wallSeconds a second (less a rounding to 4 digits).
  // A rate that left the time out would read 5.
  expect(subject!.samples[0]).toBeGreaterThanOrEqual((5 / wallSeconds) * 0.999);
  expect(subject!.samples[0]).toBeLessThan(Infinity);
  expect(baseline!.samples).toEqual([50]);
});

test('a run that times itself but says nothing of how much it did fails, rather than giving NaN', async () => {
  const blocks = lib.ratesInBlocks(async () => ({ elapsedMs: 100 }), [timedRuns(5, [100])]);
  await expect(blocks.take({ warmup: 0, iterations: 1 })).rejects.toThrow(/not how much it did/);
});

test('collectGarbage says what it needs when node runs without --expose-gc', () => {
  const script = `import(${JSON.stringify(pathToFileURL(libPath).href)}).then((lib) => { lib.collectGarbage(); console.log('collected'); })`;
  expect(execFileSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' })).toBe('collected\n');
  let failure = '';
  try {
    execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    failure = String((err as { stderr: string }).stderr);
  }
  expect(failure).toContain('collectGarbage needs node --expose-gc');
});
