// Runs one benchmark suite in a process of its own and sends its rows to the
// parent (run.mjs). A suite that moved hundreds of MiB leaves a big heap
// behind, and every local spawn of the next suite's baselines forks that
// heap's page tables: in one shared process the envd suite's `bash -l -c
// true` baseline went from 5 to 13 ms between two runs.
//
//   const { rows, cpuSpeed } = await runSuiteProcess('envd', { quick })
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { interrupted, STOP_SIGNALS, undoAllOnSignals } from './interrupt.mjs';
import { benchNodeFlags, cpuSpeed, cpuSpeedSummary } from './lib.mjs';

/**
 * What `npm run bench` runs: what users see, all through the SDK except idle
 * memory, which is read below the server so that the control plane's own
 * memory is not counted against the sandboxes.
 */
export const defaultSuites = ['sdk', 'memory'];

/**
 * The layers below the SDK, each against the same local baselines
 * (`--layers`): envd driven directly, the runtime's create, and the control
 * API's create. They show where a row's time goes. Run by default they took
 * about two of the five minutes a run may take, which the SDK's rows needed
 * for enough samples to hold between runs.
 */
export const layerSuites = ['envd', 'runtime', 'server'];

export const suiteNames = [...defaultSuites, ...layerSuites];

const self = fileURLToPath(import.meta.url);

/**
 * Runs suite `name` in a process of its own; resolves with its report. A
 * SIGINT or SIGTERM this process gets meanwhile goes on to the suite, which
 * then removes what it made and ends (the promise rejects); this process
 * does not end on it.
 */
export function runSuiteProcess(name, { quick }) {
  return new Promise((resolve, reject) => {
    // --expose-gc for collectGarbage (lib.mjs), which samples call once timed.
    const child = fork(self, ['--suite', name, ...(quick ? ['--quick'] : [])], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...benchNodeFlags, '--expose-gc'] });
    const forward = (signal) => child.kill(signal);
    for (const signal of STOP_SIGNALS) process.on(signal, forward);
    let report;
    child.once('message', (m) => (report = m));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      for (const s of STOP_SIGNALS) process.off(s, forward);
      if (code === 0 && report) resolve(report);
      else reject(new Error(`suite '${name}' ended with ${signal ?? `code ${code}`} before it reported its rows`));
    });
  });
}

async function main(name, quick) {
  undoAllOnSignals();
  const modules = {
    sdk: async () => (await import('./suites/sdk.mjs')).sdkSuite,
    envd: async () => (await import('./suites/envd.mjs')).envdSuite,
    memory: async () => (await import('./suites/runtime.mjs')).memorySuite,
    runtime: async () => (await import('./suites/runtime.mjs')).runtimeSuite,
    server: async () => (await import('./suites/server.mjs')).serverSuite,
  };
  const suite = await modules[name]();
  // Each line says how long the suite had run when it started that phase
  // (or ended, for the last line), and how fast the CPU this process was on
  // ran just then (lib.mjs, cpuSpeed). Some lines come while the suite's
  // server still fills its warm pool, and their sample reads low with it:
  // the summary is the median.
  const started = performance.now();
  const speeds = [];
  const log = (msg) => {
    const speed = cpuSpeed();
    speeds.push(speed);
    process.stderr.write(`[bench] ${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s ${msg} (CPU ${speed.toFixed(0)} MiB/s)\n`);
  };
  // Stopped, the suite's code fails wherever it was (its server is gone);
  // the undoing the signal started ends the process, not that failure.
  let rows;
  try {
    rows = await suite({ quick, log });
  } catch (err) {
    if (interrupted()) {
      process.stderr.write(`[bench] ${name}, stopped: ${err.message}\n`);
      await interrupted();
    }
    throw err;
  }
  if (interrupted()) await interrupted();
  log(`${name}: done`);
  process.send({ rows, cpuSpeed: cpuSpeedSummary(speeds) }, () => process.disconnect());
}

if (process.argv[1] === self && process.argv[2] === '--suite') await main(process.argv[3], process.argv.includes('--quick'));
