// The measuring helpers of tools/bench/lib.mjs: the order in which a subject
// and its baselines alternate, how a sample's time and amount are read, and
// how a row's ratio and target come out. No service is started.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Summary {
  n: number;
  p50: number;
  p90: number;
  samples: number[];
}
type Sample = () => Promise<unknown>;
interface LibModule {
  alternate(fns: (Sample | { fn: Sample; every: number })[], opts?: { rate?: boolean }): { take(o: { warmup?: number; iterations: number }): Promise<void>; result(): Summary[] };
  summarize(samples: number[], opts?: { rate?: boolean }): Summary;
  row(o: { suite: string; name: string; unit: string; value: Summary; baseline?: Summary; target?: { on: 'ratio' | 'value'; op: '<=' | '>='; value: number } }): { ratio: number | null; met: boolean | null };
  allAtOnce<T>(count: number, make: () => Promise<T>): Promise<{ made: T[]; failed: Error[] }>;
  failures(failed: Error[], total: number): string | undefined;
}

const root = fileURLToPath(new URL('../../..', import.meta.url));
let lib: LibModule;
beforeAll(async () => {
  lib = (await import(pathToFileURL(join(root, 'tools/bench/lib.mjs')).href)) as LibModule;
});

test('a subject and its baselines alternate A B C, C B A, over every take, after their warm-up; `every` skips rounds', async () => {
  const calls: string[] = [];
  const fn = (name: string) => async () => void calls.push(name);
  const a = lib.alternate([fn('A'), fn('B'), { fn: fn('C'), every: 2 }]);
  await a.take({ warmup: 1, iterations: 2 });
  await a.take({ warmup: 0, iterations: 2 });
  // Warm-up A B C; round 0 A B C; round 1 B A (C skipped); round 2 A B C; round 3 B A.
  expect(calls.join(' ')).toBe('A B C A B C B A A B C B A');
  expect(a.result().map((s) => s.n)).toEqual([4, 4, 2]);
});

test('a sample that timed itself counts its own time; a rate is its amount over that time', async () => {
  let call = 0;
  const ms = [1000, 500, 250];
  const a = lib.alternate([async () => ({ ms: ms[call++], count: 10 }), async () => ({ ms: 1000, bytes: 2 * 1024 * 1024 })], { rate: true });
  await a.take({ warmup: 0, iterations: 3 });
  const [subject, baseline] = a.result();
  expect(subject!.samples).toEqual([10, 20, 40]);
  expect(baseline!.samples).toEqual([2, 2, 2]);
  // For rates the slow end is the low one.
  expect(subject!.p90).toBe(10);
});

test('a rate whose sample says nothing of how much it did fails, rather than giving NaN', async () => {
  const a = lib.alternate([async () => ({ ms: 100 })], { rate: true });
  await expect(a.take({ warmup: 0, iterations: 1 })).rejects.toThrow(/without how much it did/);
});

test('a sample that resolves with nothing is timed where it runs', async () => {
  const a = lib.alternate([() => new Promise((r) => setTimeout(r, 30))]);
  await a.take({ warmup: 0, iterations: 1 });
  expect(a.result()[0]!.p50).toBeGreaterThanOrEqual(29);
});

test("a row's ratio is the quotient of the two medians, and its target is checked on the ratio or on its own p50", () => {
  const value = lib.summarize([10, 20, 30, 40, 50]);
  const baseline = lib.summarize([10, 10, 20, 20, 20]);
  expect(value.p50).toBe(30);
  expect(value.p90).toBe(50);
  const onRatio = lib.row({ suite: 's', name: 'n', unit: 'ms', value, baseline, target: { on: 'ratio', op: '<=', value: 1.5 } });
  expect(onRatio).toMatchObject({ ratio: 1.5, met: true });
  expect(lib.row({ suite: 's', name: 'n', unit: 'ms', value, baseline, target: { on: 'value', op: '<=', value: 25 } })).toMatchObject({ ratio: 1.5, met: false });
  expect(lib.row({ suite: 's', name: 'n', unit: 'ms', value })).toMatchObject({ ratio: null, met: null });
});

test('allAtOnce keeps what was made when some fail, and says how many failed and why', async () => {
  let i = 0;
  const { made, failed } = await lib.allAtOnce(5, async () => {
    const n = i++;
    if (n % 2) throw new Error(`envd of ${n} did not answer`);
    return n;
  });
  expect(made).toEqual([0, 2, 4]);
  expect(lib.failures(failed, 5)).toBe('2 of 5 failed: envd of 1 did not answer');
  expect(lib.failures([], 5)).toBeUndefined();
});
