#!/usr/bin/env node
// `npm run bench`: runs the benchmark suites against the built packages and
// writes tools/bench/results/latest.json and docs/performance.md.
//
//   node tools/bench/run.mjs [--quick] [--layers] [--only SUITE[,SUITE]]
//     --layers   also the layers below the SDK (envd, runtime, server)
//   node tools/bench/run.mjs --render   (rewrites docs/performance.md from the
//                                        results kept, without running anything)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { comparisonMarkdown, wasBusy } from './compare.mjs';
import { exitCodeOf, STOP_SIGNALS } from './interrupt.mjs';
import { loadSince, loadSnapshot, machine, settleDisk } from './lib.mjs';
import { defaultSuites, runSuiteProcess, suiteNames } from './suite-process.mjs';

const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, only: { type: 'string' }, render: { type: 'boolean', default: false }, layers: { type: 'boolean', default: false } } });
const root = new URL('../..', import.meta.url).pathname;
const results = join(root, 'tools/bench/results');
const readRun = (name) => (existsSync(join(results, name)) ? JSON.parse(readFileSync(join(results, name), 'utf8')) : null);

if (values.render) {
  const latest = readRun('latest.json');
  if (!latest) throw new Error(`no ${join(results, 'latest.json')} to render`);
  writeFileSync(join(root, 'docs/performance.md'), markdown(latest, readRun('previous.json')));
  process.exit(0);
}

const selected = values.only ? values.only.split(',') : values.layers ? suiteNames : defaultSuites;
for (const name of selected) if (!suiteNames.includes(name)) throw new Error(`unknown suite '${name}' (have: ${suiteNames.join(', ')})`);

// Stopped (Ctrl-C, SIGTERM), the run writes no results: the suite running
// then removes what it made (suite-process.mjs) and this waits for it.
let stoppedBy = null;
for (const signal of STOP_SIGNALS) process.on(signal, () => (stoppedBy ??= signal));
const endIfStopped = () => {
  if (!stoppedBy) return;
  process.stderr.write(`[bench] stopped by ${stoppedBy}: no results written\n`);
  process.exit(exitCodeOf(stoppedBy));
};

const started = new Date();
const rows = [];
const load = [];
// Each suite in a fresh process: what one suite leaves in memory must not weigh on the next one's baselines.
for (const name of selected) {
  endIfStopped();
  // What the build before `npm run bench` wrote (or the suite before) is on
  // disk before the suite starts: right after a build that had to compile,
  // the first 20 cold creates read 250 to 350 ms and bare `runc run` 50 to
  // 70, against 170 to 260 and 25 to 60 in a run whose build was cached.
  settleDisk();
  const before = loadSnapshot();
  const report = await runSuiteProcess(name, { quick: values.quick }).catch((err) => {
    endIfStopped();
    throw err;
  });
  endIfStopped();
  rows.push(...report.rows);
  load.push({ suite: name, ...loadSince(before), cpuSpeed: report.cpuSpeed });
}

const result = { date: started.toISOString(), quick: values.quick, suites: selected, machine: machine(), load, rows };
mkdirSync(results, { recursive: true });
// The run this one replaces is kept, and the table ends with how each row
// moved against it: the issue's rule is about two consecutive runs.
const previous = readRun('latest.json');
if (previous) writeFileSync(join(results, 'previous.json'), JSON.stringify(previous, null, 2) + '\n');
writeFileSync(join(results, 'latest.json'), JSON.stringify(result, null, 2) + '\n');
const table = markdown(result, previous);
writeFileSync(join(root, 'docs/performance.md'), table);
process.stdout.write(table);

function fmt(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}

/**
 * Three significant digits: a ratio just under its target (0.499) must not
 * print as the target (0.50). More where even three round onto the target:
 * 0.4995 misses 0.5, and printed as 0.500 it read as met.
 */
function fmtRatio(n, target) {
  if (n >= 100) return n.toFixed(0);
  let digits = 3;
  while (digits < 12 && target !== undefined && n !== target && Number(n.toPrecision(digits)) === target) digits++;
  return n.toPrecision(digits);
}

function ratioText(x) {
  if (x.ratio === null) return '–';
  const target = x.target?.on === 'ratio' ? x.target.value : undefined;
  const interval = x.ratioInterval ? ` (${x.ratioInterval.map((n) => fmtRatio(n, target)).join('–')})` : '';
  return `${fmtRatio(x.ratio, target)}×${interval}`;
}

function loadText(l) {
  const pct = (n) => (n === null ? 'not reported' : `${n.toFixed(0)}%`);
  // On a quiet day steal is 0 to 1% here; in a run at 20% rows moved by up to three quarters.
  const busy = wasBusy(l) ? ' (**the host was busy: do not compare this suite with a quiet run**)' : '';
  const cpu = l.cpuSpeed ? `, CPU ${l.cpuSpeed.p50.toFixed(0)} MiB/s (${l.cpuSpeed.min.toFixed(0)}–${l.cpuSpeed.max.toFixed(0)} over ${l.cpuSpeed.n} samples)` : '';
  return `${l.suite} ${l.seconds.toFixed(0)} s, steal ${pct(l.stealPct)}, waiting ${pct(l.waitPct)}${cpu}${busy}`;
}

/** The command that made run `r`, from its options and the suites it ran. */
function commandOf(r) {
  const ran = r.suites ?? r.load.map((l) => l.suite);
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const flags = [r.quick && '--quick', same(ran, suiteNames) ? '--layers' : !same(ran, defaultSuites) && `--only ${ran.join(',')}`].filter(Boolean);
  return `npm run bench${flags.length ? ` -- ${flags.join(' ')}` : ''}`;
}

function markdown(r, previous) {
  const m = r.machine;
  const lines = [
    '# Performance',
    '',
    `Latest run of \`${commandOf(r)}\`: ${r.date.slice(0, 10)}, on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}, Linux ${m.kernel}.`,
    '',
    `How long each suite took, and how contended the CPUs were meanwhile: \`steal\` is the share of CPU time the hypervisor gave to other machines, \`waiting\` the share of the time in which some runnable task (ours included) waited for a CPU (PSI), and \`CPU\` how fast one thread hashed (SHA-256, \`cpuSpeed\` in \`tools/bench/lib.mjs\`) at each line of the suite's log (mostly the start of a phase), the median and the range; a sample taken while the suite's server fills its warm pool reads low. ${r.load.map(loadText).join('; ')}. The further steal or waiting is above a suite's usual, or the CPU speed from another run's, the less its numbers can be compared with that run's: this machine's CPUs change speed by a third from one second to the next, with no steal to show for it.`,
    '',
    'Every benchmark runs next to a baseline measured in the same run; the ratio is the headline.',
    'Latencies are p50/p95 in ms (ratio = Paddock / baseline, lower is better); throughputs are the median and',
    'slowest-5% MiB/s (ratio = Paddock / baseline, higher is better). Absolute numbers depend on the machine.',
    'Rows with a ratio target, and most others with a local baseline, measure Paddock and its baseline in',
    "alternation (A B, B A, ...), so that the shared machine's slow moments fall on both alike and the ratio",
    'holds still between runs. The ratio of such a row is the median of the ratios of the samples taken next',
    'to each other, so it can differ a little from the quotient of the two p50s shown. The range after such a',
    "ratio is a 95% confidence interval for it, from the order statistics of its pairs: how far this run's own",
    'samples leave it open. It does not cover what moves a whole run (the load above). The concurrent creates',
    'are the exception: a batch of 20 spreads less from one batch to the next than ten bare `runc run`s next to',
    "it do, so their baseline is every bare `runc run` of the single creates' pairs, taken in the same blocks,",
    'and their ratio the quotient of the two medians, with an interval from both medians\' own.',
    'The service runs in a process of its own, with the node options `paddock start` uses; in the SDK',
    'comparison each SDK runs in a process of its own too, as in a user\'s program. Each suite starts in a',
    'fresh process, and the local baselines run and are timed in two small processes that do nothing else, so',
    'that what a suite did before does not slow its baselines down: one only starts the commands whose run is',
    'the baseline (`true`, `bash -l -c true`, `runc run`), the other moves data (pipes, loopback TCP, fs). A',
    'fork costs more the more memory its parent holds, and a process that has moved data holds more.',
    "The bench's own processes (suites, baselines, the two SDKs) start with `--initial-old-space-size=64`, as the",
    'sdk README suggests for programs that stream: with V8\'s default limits a small process that streams MiBs',
    'falls, at random, into a full GC every 10 to 20 MiB or not, and that alone moved the 256 MiB read between',
    '0.7 and 1.5 of loopback from run to run (`benchNodeFlags` in `tools/bench/lib.mjs`).',
    'A full run takes the SDK suite\'s samples in six passes over its phases, each about half a minute long, so that a',
    'stretch in which the machine runs slow or fast falls on a sixth of each row\'s samples rather than on all of them.',
    'The watch latency, whose samples take a few ms each, takes a few after every phase of every pass, 42 moments in all.',
    'Each file-transfer phase, and the phase after the last, starts once the disk has taken what the phase',
    'before wrote (`sync`), so that it does not share the cores with the writeback of earlier writes.',
    "`commands.run` keeps a command's whole output for its result, so each stdout sample leaves 256 MiB of text",
    'behind; the suite collects it (a full GC) once the sample is timed. Left to V8, it was collected every few',
    'samples, and while it was held the next sample\'s page faults cost several times as much kernel time (most',
    'likely pages the kernel had not handed out for a while, which this VM\'s host backs anew, rather than those',
    'just freed): the samples spread over 170 to 560 MiB/s (`tools/bench/probes/stdout-each.mjs`).',
    '',
    '| suite | benchmark | Paddock p50 | p95 | baseline | baseline p50 | ratio | target | met |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    const target = x.target ? `${x.target.on === 'ratio' ? 'ratio' : x.unit} ${x.target.op} ${x.target.value}` : '';
    const met = x.met === null ? '' : x.met ? 'yes' : '**no**';
    lines.push(
      `| ${x.suite} | ${x.name} | ${fmt(x.value.p50)} ${x.unit} | ${fmt(x.value.p95)} | ${x.baselineName ?? '–'} | ${x.baseline ? `${fmt(x.baseline.p50)} ${x.unit}` : '–'} | ${ratioText(x)} | ${target} | ${met} |`,
    );
  }
  const notes = r.rows.filter((x) => x.note);
  if (notes.length) lines.push('', 'Notes:', '', ...notes.map((x) => `- ${x.suite}, ${x.name}: ${x.note}.`));
  lines.push('', 'Raw numbers: `tools/bench/results/latest.json`.', '');
  if (previous) lines.push(...comparisonMarkdown(previous, r));
  return lines.join('\n');
}
