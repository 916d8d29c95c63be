// The committed summary of a run (tools/bench/run.mjs): each row against the
// previous run's, and the table docs/performance.md shows. No service is started.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Row {
  suite: string;
  name: string;
  unit: string;
  value: { n: number; p50: number; p90: number };
  baselineName: string | null;
  baseline: { p50: number } | null;
  ratio: number | null;
  target: { on: 'ratio' | 'value'; op: '<=' | '>='; value: number } | null;
  met: boolean | null;
  failed?: string;
}
interface SummaryRow {
  name: string;
  baseline: string | null;
  ratio: number | null;
  target: string | null;
  previous: number | null;
}
interface Summary {
  quick: boolean;
  rows: SummaryRow[];
}
interface RunModule {
  summary(run: object, previous: Summary | null): Summary;
  changePct(row: SummaryRow): number | null;
  markdown(s: Summary): string;
}

const root = fileURLToPath(new URL('../../..', import.meta.url));
let bench: RunModule;
beforeAll(async () => {
  bench = (await import(pathToFileURL(join(root, 'tools/bench/run.mjs')).href)) as RunModule;
});

const row = (name: string, p50: number, baseline: number | null, baselineName = 'bare runc'): Row => ({
  suite: 'sdk',
  name,
  unit: 'ms',
  value: { n: 20, p50, p90: p50 * 1.2 },
  baselineName: baseline === null ? null : baselineName,
  baseline: baseline === null ? null : { p50: baseline },
  ratio: baseline === null ? null : p50 / baseline,
  target: baseline === null ? null : { on: 'value', op: '<=', value: 250 },
  met: baseline === null ? null : p50 <= 250,
});
const run = (rows: Row[], quick = false) => ({
  date: '2026-11-27T10:00:00.000Z',
  command: 'npm run bench',
  quick,
  machine: { cpus: 2, cpuModel: 'test CPU', memoryGiB: 24, node: 'v20', kernel: '6' },
  rows,
});

test('each row is compared with the same row (suite, benchmark, baseline) of the previous run, by its ratio where it has one', () => {
  const older = bench.summary(run([row('create', 160, 40), row('create', 160, 2, 'spawn'), row('memory', 14, null)]), null);
  // The create and its bare runc both slowed by a quarter: the ratio holds. Against the spawn it moved.
  const newer = bench.summary(run([row('create', 200, 50), row('create', 200, 2, 'spawn'), row('memory', 16, null)]), older);
  expect(newer.rows.map((r) => bench.changePct(r))).toEqual([0, 25, expect.closeTo(14.29, 2)]);
  expect(newer.rows[0]).toMatchObject({ ratio: 4, target: 'ms <= 250', previous: 4 });
  const page = bench.markdown(newer);
  expect(page).toContain('| sdk | create | 200 ms | 240 | bare runc | 50.0 ms | 4.00× | ms <= 250 | yes | +0.0% |');
  expect(page).toContain('| spawn | 2.00 ms | 100× | ms <= 250 | yes | **+25.0%** |');
  expect(page).toContain('1 of 3 rows held within ±10% of the previous run.');
});

test('a row the previous run did not have, or a previous run of the other kind (--quick), gives no change', () => {
  const older = bench.summary(run([row('create', 160, 40)]), null);
  expect(bench.summary(run([row('list', 100, 50)]), older).rows[0]!.previous).toBeNull();
  const quick = bench.summary(run([row('create', 300, 40)], true), older);
  expect(quick.rows[0]!.previous).toBeNull();
  expect(bench.markdown(quick)).toContain('| **no** | – |');
});

test('a row some of whose attempts failed says so beside its name', () => {
  const s = bench.summary(run([{ ...row('20 concurrent creates', 3, 12), failed: '2 of 240 failed: envd did not answer' }]), null);
  expect(bench.markdown(s)).toContain('| sdk | 20 concurrent creates (**2 of 240 failed: envd did not answer**) | 3.00 ms |');
});
