// How a run's rows moved against the run before it: the issue's rule is that
// p50s hold to ±10% between two consecutive runs, and this is where that is
// read off. run.mjs keeps the run it replaces as results/previous.json and
// puts this comparison under the table; it can also be run by hand:
//
//   node tools/bench/compare.mjs OLDER.json NEWER.json
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { medianInterval } from './lib.mjs';

/** How far a row's headline may move between two runs and still count as holding. */
export const HOLD_PCT = 10;

/** Steal above which a suite's numbers are marked as not comparable (run.mjs says so in its table). */
export const STEAL_BUSY_PCT = 5;

/** Whether a suite's load (`loadSince` in lib.mjs) marks it as run on a busy host. */
export const wasBusy = (load) => load.stealPct !== null && load.stealPct > STEAL_BUSY_PCT;

const key = (x) => `${x.suite}\u0000${x.name}\u0000${x.baselineName ?? ''}`;
const subject = (x) => `${x.suite}\u0000${x.name}`;

/**
 * The number a row is judged by: the ratio to its baseline where it has one
 * (the headline, as in the table), else its own p50. A target on the row's
 * own value (create to first command, in ms) does not change that: the issue
 * makes the ratio to a baseline of the same run the headline, and a whole
 * run on a faster or slower machine moves a create and its bare `runc run`
 * alike (by +20.7% and +22.8% in one pair of runs here), which only the ratio
 * cancels. The target is still checked on the value. `like` decides which
 * number, when given: a row of an older run is judged as the newer run's row
 * is (an older run may have had no baseline for it).
 */
export function headline(x, like = x) {
  return hasRatio(like) ? (x.ratio ?? x.value.p50) : x.value.p50;
}

const hasRatio = (x) => x.ratio !== null && x.ratio !== undefined;

/**
 * How uncertain a run's headline for row `x` is from its own samples alone:
 * half the width of its 95% interval, as a fraction of the headline (the
 * paired ratio's interval, or that of the median of the row's own samples),
 * or null where the row has fewer than 6 samples. `like` as for headline.
 */
export function headlineUncertainty(x, like = x) {
  if (hasRatio(like) && hasRatio(x)) {
    return x.ratioInterval ? (x.ratioInterval[1] - x.ratioInterval[0]) / 2 / x.ratio : null;
  }
  const interval = x.value.samples?.length >= 6 ? medianInterval([...x.value.samples].sort((a, b) => a - b)) : null;
  return interval ? (interval[1] - interval[0]) / 2 / x.value.p50 : null;
}

/**
 * How far, in %, two runs' headlines of a row move apart nine times in ten
 * from their samples alone, with each run's uncertainty (headlineUncertainty)
 * taken as 1.96 standard errors of a normal estimate: 1.645 standard errors of
 * their difference. Null when either run has no interval.
 */
export function samplingSpreadPct(hOlder, hNewer) {
  if (hOlder === null || hNewer === null) return null;
  return (100 * 1.645 * Math.hypot(hOlder, hNewer)) / 1.96;
}

const change = (before, after) => (before > 0 && after > 0 ? (100 * (after - before)) / before : null);

/**
 * Why two runs cannot be compared at all (another machine, another mode),
 * or null when they can.
 */
export function incomparable(older, newer) {
  if (older.quick !== newer.quick) return `one run was --quick and the other was not`;
  const m = (r) => `${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memoryGiB} GiB`;
  if (m(older) !== m(newer)) return `the runs were on different machines (${m(older)}; ${m(newer)})`;
  return null;
}

/**
 * Each suite's CPU speed (the median of its `cpuSpeed` samples, lib.mjs) in
 * the two runs, and how far it moved in %, by suite: `{ before, after, pct }`.
 * A suite that either run did not sample is left out.
 */
export function cpuSpeedChanges(older, newer) {
  const before = new Map(older.load.map((l) => [l.suite, l.cpuSpeed?.p50]));
  const changes = new Map();
  for (const l of newer.load) {
    const was = before.get(l.suite);
    const pct = was && l.cpuSpeed ? change(was, l.cpuSpeed.p50) : null;
    if (pct !== null) changes.set(l.suite, { before: was, after: l.cpuSpeed.p50, pct });
  }
  return changes;
}

/**
 * Row by row: the headline before and after and its change in %, the row's
 * own p50 and its baseline's p50 change (what moved the machine), and
 * whether it held within HOLD_PCT; `judged` is false for a subject's second
 * row (see above). Rows in only one of the runs are left out.
 */
export function compareRuns(older, newer) {
  const before = new Map(older.rows.map((x) => [key(x), x]));
  const busy = (run) => new Set(run.load.filter(wasBusy).map((l) => l.suite));
  const busyBefore = busy(older);
  const busyNow = busy(newer);
  const cpu = cpuSpeedChanges(older, newer);
  const judgedSubjects = new Set();
  const rows = [];
  for (const x of newer.rows) {
    const old = before.get(key(x));
    if (!old) continue;
    // A subject shown against two baselines (a create against bare runc and
    // a bare spawn, a read against loopback TCP and an fs copy) has one p50:
    // it is judged in its first row, against the baseline the issue names
    // first and the target is on. The second row's ratio moves with its own
    // baseline besides, which says how steady that baseline is on this
    // machine, not whether the subject's numbers repeat; it is listed, not counted.
    const judged = !judgedSubjects.has(subject(x));
    judgedSubjects.add(subject(x));
    const moved = change(headline(old, x), headline(x));
    const sampling = samplingSpreadPct(headlineUncertainty(old, x), headlineUncertainty(x));
    rows.push({
      suite: x.suite,
      name: x.name,
      baselineName: x.baselineName ?? null,
      onRatio: hasRatio(x),
      hasTarget: Boolean(x.target),
      before: headline(old, x),
      after: headline(x),
      changePct: moved,
      p50ChangePct: change(old.value.p50, x.value.p50),
      baselineChangePct: old.baseline && x.baseline ? change(old.baseline.p50, x.baseline.p50) : null,
      judged,
      held: moved !== null && Math.abs(moved) <= HOLD_PCT,
      samplingPct: sampling,
      busy: busyBefore.has(x.suite) || busyNow.has(x.suite),
      cpuChangePct: cpu.get(x.suite)?.pct ?? null,
    });
  }
  return rows;
}

const signed = (n) => (n === null ? '–' : `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(1)}%`);
const num = (n) => (n >= 100 ? n.toFixed(0) : n.toPrecision(3));

/** The comparison as markdown lines, for docs/performance.md or a terminal. */
export function comparisonMarkdown(older, newer) {
  const lines = ['## Against the previous run', ''];
  const why = incomparable(older, newer);
  if (why) return [...lines, `The previous run (${older.date.slice(0, 16).replace('T', ' ')} UTC) is not compared: ${why}.`, ''];
  const all = compareRuns(older, newer);
  const rows = all.filter((c) => c.judged);
  const moved = rows.filter((c) => !c.held);
  const targeted = rows.filter((c) => c.hasTarget);
  const undersampled = rows.filter((c) => c.samplingPct !== null && c.samplingPct > HOLD_PCT);
  const beyondSampling = moved.filter((c) => c.samplingPct !== null && Math.abs(c.changePct) > c.samplingPct);
  const context = all.length - rows.length;
  lines.push(
    `The previous run is \`tools/bench/results/previous.json\` (${older.date.slice(0, 16).replace('T', ' ')} UTC); this one started ${newer.date.slice(0, 16).replace('T', ' ')} UTC.`,
    "Each row is judged by its headline: its ratio to its baseline where it has one, or its own p50 where it has none. Targets on a row's own value (ms, MiB) are checked on that value in the table above, but a whole run on a faster or slower machine moves such a row and its baseline alike, and only the ratio cancels that." +
      (context ? ` A benchmark shown against two baselines is judged once, in its first row; the ${context === 1 ? 'second row' : `${context} second rows`} (in italics) ${context === 1 ? 'is' : 'are'} listed for how ${context === 1 ? 'its baseline' : 'their baselines'} moved, and not counted.` : '') +
      ` ${rows.length - moved.length} of ${rows.length} judged rows held within ±${HOLD_PCT}%` +
      (moved.length ? `; ${moved.length} moved further (in bold).` : '.') +
      ` Of the ${targeted.length} rows with a target, ${targeted.filter((c) => c.held).length} held.`,
    "The last two columns say how the row's own p50 and its baseline's p50 moved: when a baseline moves by",
    'tens of percent, the machine itself ran at another speed, and the ratio cancels that only in part.',
    `A suite that ran with more than ${STEAL_BUSY_PCT}% steal in either run is marked busy, and one whose CPU speed moved by more`,
    `than ±${HOLD_PCT}% between the runs says by how much: ${cpuLine(older, newer)}.`,
    "`Sampling` is how far the row's headline would move between the two runs nine times in ten from the samples",
    "each took alone, by their 95% intervals: a move within it says nothing about the machine, and where it is wider",
    `than ±${HOLD_PCT}% the row took fewer samples than the rule needs. It is wider than that for ${undersampled.length} of the ${rows.filter((c) => c.samplingPct !== null).length} judged rows that have it;` +
      ` ${beyondSampling.length} of the ${moved.length} rows that moved moved by more than it. Rows of fewer than 6 samples have none.`,
    '',
    '| suite | benchmark | baseline | target | previous | this run | change | sampling | own p50 | baseline p50 |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const c of all) {
    const marks = [c.busy ? 'busy' : null, c.cpuChangePct !== null && Math.abs(c.cpuChangePct) > HOLD_PCT ? `CPU ${signed(c.cpuChangePct)}` : null].filter(Boolean);
    const unit = c.onRatio ? '×' : '';
    const changeText = !c.judged ? `_${signed(c.changePct)}_` : c.held ? signed(c.changePct) : `**${signed(c.changePct)}**`;
    lines.push(
      `| ${c.suite}${marks.length ? ` (${marks.join(', ')})` : ''} | ${c.judged ? c.name : `_${c.name}_`} | ${c.baselineName ?? '–'} | ${c.hasTarget ? 'yes' : ''} | ${num(c.before)}${unit} | ${num(c.after)}${unit} | ${changeText} | ${c.samplingPct === null ? '–' : `±${c.samplingPct.toFixed(1)}%`} | ${signed(c.p50ChangePct)} | ${signed(c.baselineChangePct)} |`,
    );
  }
  lines.push('');
  return lines;
}

/** Each suite's CPU speed in the two runs, for the text above the table. */
function cpuLine(older, newer) {
  const parts = [...cpuSpeedChanges(older, newer)].map(([suite, c]) => `${suite} ${c.before.toFixed(0)} → ${c.after.toFixed(0)} MiB/s (${signed(c.pct)})`);
  return parts.length ? `SHA-256 on one thread, the median of each suite's samples, ${parts.join('; ')}` : 'one of the runs did not measure it';
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [olderPath, newerPath] = process.argv.slice(2);
  if (!olderPath || !newerPath) {
    process.stderr.write('usage: node tools/bench/compare.mjs OLDER.json NEWER.json\n');
    process.exit(2);
  }
  const read = (p) => JSON.parse(readFileSync(p, 'utf8'));
  process.stdout.write(comparisonMarkdown(read(olderPath), read(newerPath)).join('\n'));
}
