// How tools/bench/compare.mjs judges a run against the one before it: which
// number of a row must hold within ±10%, and which rows count at all. Pure
// functions over two runs' results; no service is started.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Compared {
  name: string;
  baselineName: string | null;
  before: number;
  after: number;
  changePct: number | null;
  judged: boolean;
  held: boolean;
}
interface CompareModule {
  compareRuns(older: Run, newer: Run): Compared[];
  comparisonMarkdown(older: Run, newer: Run): string[];
}
interface Row {
  suite: string;
  name: string;
  value: { p50: number };
  baseline: { p50: number } | null;
  baselineName: string | null;
  ratio: number | null;
  target: { on: 'ratio' | 'value'; op: '<=' | '>='; value: number } | null;
}
interface Run {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memoryGiB: number };
  load: { suite: string; stealPct: number | null }[];
  rows: Row[];
}

const root = fileURLToPath(new URL('../../..', import.meta.url));
let compare: CompareModule;
beforeAll(async () => {
  compare = (await import(pathToFileURL(join(root, 'tools/bench/compare.mjs')).href)) as CompareModule;
});

const row = (name: string, own: number, base: number | null, extra: Partial<Row> = {}): Row => ({
  suite: 'sdk',
  name,
  value: { p50: own },
  baseline: base === null ? null : { p50: base },
  baselineName: extra.baselineName ?? (base === null ? null : 'baseline'),
  ratio: base === null ? null : own / base,
  target: null,
  ...extra,
});
const run = (date: string, rows: Row[]): Run => ({
  date,
  quick: false,
  machine: { cpus: 2, cpuModel: 'test CPU', memoryGiB: 24 },
  load: [{ suite: 'sdk', stealPct: 0 }],
  rows,
});

/** Two runs in which the second ran on a machine 25% slower throughout. */
function slowerSecondRun() {
  const older = run('2026-11-23T10:00:00Z', [
    row('create, cold', 160, 40, { baselineName: 'bare runc', target: { on: 'value', op: '<=', value: 250 } }),
    row('create, cold', 160, 2, { baselineName: 'spawn' }),
    row('memory', 14, null),
  ]);
  const newer = run('2026-11-23T10:05:00Z', [
    // The create and its bare runc both slowed by about a quarter; the spawn baseline did not.
    row('create, cold', 200, 49, { baselineName: 'bare runc', target: { on: 'value', op: '<=', value: 250 } }),
    row('create, cold', 200, 2, { baselineName: 'spawn' }),
    row('memory', 14.5, null),
  ]);
  return { older, newer };
}

test('a row with a baseline is judged by its ratio, also where its target is on its own value', () => {
  const { older, newer } = slowerSecondRun();
  const create = compare.compareRuns(older, newer).find((c) => c.baselineName === 'bare runc')!;
  expect(create.before).toBeCloseTo(4);
  expect(create.after).toBeCloseTo(200 / 49);
  expect(create.changePct!).toBeCloseTo(2.04, 1);
  expect(create.judged).toBe(true);
  expect(create.held).toBe(true);
});

test('a second baseline of the same benchmark is listed but not judged', () => {
  const { older, newer } = slowerSecondRun();
  const spawn = compare.compareRuns(older, newer).find((c) => c.baselineName === 'spawn')!;
  expect(spawn.changePct!).toBeCloseTo(25, 5);
  expect(spawn.held).toBe(false);
  expect(spawn.judged).toBe(false);
});

test('a row without a baseline is judged by its own p50', () => {
  const { older, newer } = slowerSecondRun();
  const memory = compare.compareRuns(older, newer).find((c) => c.name === 'memory')!;
  expect(memory.before).toBe(14);
  expect(memory.after).toBe(14.5);
  expect(memory.judged).toBe(true);
  expect(memory.held).toBe(true);
});

test('the markdown counts judged rows only, and marks the second rows', () => {
  const { older, newer } = slowerSecondRun();
  const text = compare.comparisonMarkdown(older, newer).join('\n');
  expect(text).toContain('the second row (in italics) is listed for how its baseline moved, and not counted.');
  expect(text).toContain('2 of 2 judged rows held within ±10%.');
  expect(text).toContain('| sdk | _create, cold_ | spawn |');
  expect(text).toContain('_+25.0%_');
});

test('a judged row that moved beyond ±10% is counted and set in bold', () => {
  const { older, newer } = slowerSecondRun();
  newer.rows[0] = row('create, cold', 200, 40, { baselineName: 'bare runc', target: { on: 'value', op: '<=', value: 250 } });
  const create = compare.compareRuns(older, newer).find((c) => c.baselineName === 'bare runc')!;
  expect(create.held).toBe(false);
  const text = compare.comparisonMarkdown(older, newer).join('\n');
  expect(text).toContain('1 of 2 judged rows held within ±10%; 1 moved further (in bold).');
  expect(text).toContain('**+25.0%**');
});
