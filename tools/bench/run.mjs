#!/usr/bin/env node
// `npm run bench`: runs the suites, each in a fresh process, and writes the
// summary tools/bench/results/latest.json (committed), every sample to
// tools/bench/results/samples.json (not committed), and docs/performance.md.
//
//   node tools/bench/run.mjs [--quick] [--layers] [--only SUITE[,SUITE]]
//   node tools/bench/run.mjs --render    (docs/performance.md from latest.json)
import { fork, spawnSync } from 'node:child_process';
import { cpus, release, totalmem } from 'node:os';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { exitCodeOf, interrupted, STOP_SIGNALS, undoAllOnSignals } from './interrupt.mjs';
import { benchNodeFlags } from './lib.mjs';

// Every runtime and server of the bench shares the image store and the built
// base that the tests use (tools/jest/run.mjs), so no suite unpacks the base.
process.env.PADDOCK_TEST_CACHE ??= '/var/tmp/paddock-test-cache';
process.env.PADDOCK_IMAGES_DIR ??= `${process.env.PADDOCK_TEST_CACHE}/layers`;
process.env.PADDOCK_CACHE_DIR ??= process.env.PADDOCK_TEST_CACHE;

/** What users see, run by default; `--layers` adds the layers below the SDK, to show where a row's time goes. */
const suites = {
  sdk: async () => (await import('./suites/sdk.mjs')).sdkSuite,
  memory: async () => (await import('./suites/runtime.mjs')).memorySuite,
  envd: async () => (await import('./suites/envd.mjs')).envdSuite,
  runtime: async () => (await import('./suites/runtime.mjs')).runtimeSuite,
  server: async () => (await import('./suites/server.mjs')).serverSuite,
  images: async () => (await import('./suites/images.mjs')).imagesSuite,
  builds: async () => (await import('./suites/builds.mjs')).buildsSuite,
  network: async () => (await import('./suites/network.mjs')).networkSuite,
  'code-interpreter': async () => (await import('./suites/code-interpreter.mjs')).codeInterpreterSuite,
};
const defaultSuites = ['sdk', 'memory'];

/** How far a row's headline may move from the previous run's and still count as holding. */
export const HOLD_PCT = 10;

const self = fileURLToPath(import.meta.url);
const path = (p) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const latestFile = path('tools/bench/results/latest.json');
const pageFile = path('docs/performance.md');

/** A row's key across runs, and its headline: the ratio to its baseline, or its own p50 where it has none. */
const key = (r) => `${r.suite}|${r.name}|${r.baseline ?? ''}`;
const headline = (r) => r.ratio ?? r.p50;

/**
 * The summary of a run: per row its p50 and p90, its baseline's p50, the
 * ratio, the target and whether it is met, and the previous run's headline
 * of the same row (when that run was of the same kind).
 */
export function summary(run, previous) {
  const before = new Map(previous && previous.quick === run.quick ? previous.rows.map((r) => [key(r), headline(r)]) : []);
  const rows = run.rows.map((x) => {
    const t = x.target;
    const r = { suite: x.suite, name: x.name, unit: x.unit, n: x.value.n, p50: x.value.p50, p90: x.value.p90, baseline: x.baselineName, baselineP50: x.baseline?.p50 ?? null, ratio: x.ratio };
    const target = t ? `${t.on === 'ratio' ? 'ratio' : x.unit} ${t.op} ${t.value}` : null;
    return { ...r, target, met: x.met, failed: x.failed ?? null, previous: before.get(key(r)) ?? null };
  });
  return { date: run.date, command: run.command, quick: run.quick, machine: run.machine, rows };
}

/** Row by row, the headline's change against the previous run in %, or null where there is none. */
export const changePct = (r) => (r.previous ? (100 * (headline(r) - r.previous)) / r.previous : null);

const fmt = (n) => (n === null || n === undefined ? '–' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toPrecision(3));

export function markdown(s) {
  const m = s.machine;
  const change = (r) => {
    const c = changePct(r);
    if (c === null) return '–';
    const text = `${c >= 0 ? '+' : '−'}${Math.abs(c).toFixed(1)}%`;
    return Math.abs(c) > HOLD_PCT ? `**${text}**` : text;
  };
  const moved = s.rows.filter((r) => changePct(r) !== null);
  const held = moved.filter((r) => Math.abs(changePct(r)) <= HOLD_PCT).length;
  return [
    '# Performance',
    '',
    '## Method',
    '',
    '`npm run bench` measures each benchmark next to a baseline taken in the same run, on the same machine,',
    'in alternation (A B, B A, ...), so that the slow and fast moments of a shared machine fall on both;',
    "the ratio of the two medians (p50) is the headline, and absolute numbers are context. Latencies are in",
    'ms (lower is better), throughputs in MiB/s or sandboxes/s (higher is better), and p90 is the slow end of',
    'either. The service runs in its own process with the node options `paddock start` uses, each SDK of the',
    'comparison in its own, and the local baselines in two small processes that do nothing else. The SDK',
    'suite spreads every row over six passes of its phases. `--layers` adds envd, the runtime and the control',
    `API on their own; \`--quick\` is a rough pass. The last column is the headline's change against the`,
    `previous run (\`tools/bench/results/latest.json\` keeps it); beyond ±${HOLD_PCT}% it is in bold.`,
    '',
    '## Latest run',
    '',
    `\`${s.command}\`, ${s.date.slice(0, 10)}, on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}${m.envdNode && m.envdNode !== m.node ? ` (envd on Node ${m.envdNode})` : ''}, Linux ${m.kernel}.` +
      (m.pageFaultUs !== undefined ? ` There, a first touch of a 4 KiB page took ${fmt(m.pageFaultUs)} µs and a spawn of /bin/true ${fmt(m.spawnMs)} ms.` : '') +
      (moved.length ? ` ${held} of ${moved.length} rows held within ±${HOLD_PCT}% of the previous run.` : ''),
    '',
    '| suite | benchmark | p50 | p90 | baseline | baseline p50 | ratio | target | met | change |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...s.rows.map(
      (r) =>
        `| ${r.suite} | ${r.name}${r.failed ? ` (**${r.failed}**)` : ''} | ${fmt(r.p50)} ${r.unit} | ${fmt(r.p90)} | ${r.baseline ?? '–'} | ${r.baseline ? `${fmt(r.baselineP50)} ${r.unit}` : '–'} | ${r.ratio === null ? '–' : `${fmt(r.ratio)}×`} | ${r.target ?? ''} | ${r.met === null ? '' : r.met ? 'yes' : '**no**'} | ${change(r)} |`,
    ),
    '',
  ].join('\n');
}

const readLatest = () => (existsSync(latestFile) ? JSON.parse(readFileSync(latestFile, 'utf8')) : null);

/** One row a line: small diffs from run to run. */
const jsonLines = (s) => JSON.stringify({ ...s, rows: [] }, null, 2).replace('"rows": []', `"rows": [\n${s.rows.map((r) => `    ${JSON.stringify(r)}`).join(',\n')}\n  ]`) + '\n';

/** The version of the node envd's sandbox directory runs (its build records it), if known. */
function envdNode() {
  try {
    return JSON.parse(readFileSync(path('packages/envd/dist/sandbox.json'), 'utf8')).node;
  } catch {
    return undefined;
  }
}

/**
 * What the machine charges for the two things every create pays in numbers:
 * the first touch of a 4 KiB page of new memory (µs) and a spawn of
 * /bin/true from this small process (ms), medians of a few tries, taken
 * before the suites. Machines of the same size have differed tenfold in
 * both (a hypervisor that makes page faults dear slows every fork, exec
 * and process start), so the page says which kind of machine a run had.
 */
function machineCosts() {
  const median = (f, n) => Array.from({ length: n }, f).sort((a, b) => a - b)[n >> 1];
  const pageFaultUs = median(() => {
    const size = 32 * 2 ** 20;
    const b = Buffer.allocUnsafeSlow(size); // memory not yet touched
    const t = process.hrtime.bigint();
    for (let i = 0; i < size; i += 4096) b[i] = 1;
    return Number(process.hrtime.bigint() - t) / 1e3 / (size / 4096);
  }, 5);
  const spawnMs = median(() => {
    const t = performance.now();
    const r = spawnSync('/bin/true');
    if (r.status !== 0) throw new Error(`/bin/true ended with ${r.status ?? r.signal}`);
    return performance.now() - t;
  }, 11);
  return { pageFaultUs, spawnMs };
}

/** Runs suite `name` in a process of its own (a suite's heap must not weigh on the next); resolves with its rows. */
function runSuiteProcess(name, quick) {
  return new Promise((resolve, reject) => {
    const child = fork(self, ['--suite', name, ...(quick ? ['--quick'] : [])], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...benchNodeFlags, '--expose-gc'] });
    // A signal goes on to the suite, which removes what it made and ends.
    const forward = (signal) => child.kill(signal);
    for (const signal of STOP_SIGNALS) process.on(signal, forward);
    let rows;
    child.once('message', (m) => (rows = m));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      for (const s of STOP_SIGNALS) process.off(s, forward);
      if (code === 0 && rows) resolve(rows);
      else reject(new Error(`suite '${name}' ended with ${signal ?? `code ${code}`} before it reported its rows`));
    });
  });
}

async function suiteMain(name, quick) {
  undoAllOnSignals();
  const started = performance.now();
  const log = (msg) => process.stderr.write(`[bench] ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s ${msg}\n`);
  let rows;
  try {
    rows = await (await suites[name]())({ quick, log });
  } catch (err) {
    // Stopped, the suite fails wherever it was; the undoing the signal started ends the process.
    if (interrupted()) log(`${name}, stopped: ${err.message}`);
    await interrupted();
    throw err;
  }
  await interrupted();
  log(`${name}: done`);
  process.send(rows, () => process.disconnect());
}

async function main() {
  const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, only: { type: 'string' }, render: { type: 'boolean', default: false }, layers: { type: 'boolean', default: false } } });
  if (values.render) {
    const latest = readLatest();
    if (!latest) throw new Error(`no ${latestFile} to render`);
    return writeFileSync(pageFile, markdown(latest));
  }
  const selected = values.only ? values.only.split(',') : values.layers ? Object.keys(suites) : defaultSuites;
  for (const name of selected) if (!suites[name]) throw new Error(`unknown suite '${name}' (have: ${Object.keys(suites).join(', ')})`);

  // Stopped (Ctrl-C, SIGTERM), the run writes no results: the running suite removes what it made, and this waits for it.
  let stoppedBy = null;
  for (const signal of STOP_SIGNALS) process.on(signal, () => (stoppedBy ??= signal));
  const endIfStopped = () => {
    if (!stoppedBy) return;
    process.stderr.write(`[bench] stopped by ${stoppedBy}: no results written\n`);
    process.exit(exitCodeOf(stoppedBy));
  };
  const date = new Date().toISOString();
  // envd's node is the one its build copied: a build left by another node (turbo replays a cached one) measures that node.
  const envd = envdNode();
  if (envd !== process.version) process.stderr.write(`[bench] warning: envd's build runs Node ${envd ?? '(unknown)'}, not this ${process.version}: rebuild it (npx turbo run build --filter=@paddock/envd --force)\n`);
  const costs = machineCosts();
  const rows = [];
  for (const name of selected) {
    endIfStopped();
    rows.push(...(await runSuiteProcess(name, values.quick).catch((err) => (endIfStopped(), Promise.reject(err)))));
  }
  endIfStopped();
  const flags = [values.quick && '--quick', values.only ? `--only ${values.only}` : values.layers && '--layers'].filter(Boolean);
  const c = cpus();
  const machine = { cpus: c.length, cpuModel: c[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, envdNode: envd, kernel: release(), ...costs };
  const run = { date, command: `npm run bench${flags.length ? ` -- ${flags.join(' ')}` : ''}`, quick: values.quick, machine, rows };
  const s = summary(run, readLatest());
  mkdirSync(path('tools/bench/results'), { recursive: true });
  writeFileSync(path('tools/bench/results/samples.json'), JSON.stringify(run) + '\n');
  writeFileSync(latestFile, jsonLines(s));
  writeFileSync(pageFile, markdown(s));
  process.stdout.write(markdown(s));
}

if (process.argv[1] === self) {
  if (process.argv[2] === '--suite') await suiteMain(process.argv[3], process.argv.includes('--quick'));
  else await main();
}
