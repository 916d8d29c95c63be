// Probe, not part of `npm run bench`: how well bare `runc run`s next to a
// batch of concurrent creates serve as its baseline. Each of BLOCKS rounds
// times N cold creates at once (straight through the runtime), removes them,
// then times 20 bare `runc run true` one after another and N at once. It
// prints each round's rates, then how much each spreads from round to round
// (sd over mean) and how much the batch's ratio to each does: a baseline
// narrows a ratio only where it spreads less than twice what it shares with
// the batch.
//
//   BLOCKS=16 N=20 node tools/bench/probes/bare-blocks.mjs
import { startBaselineProcess } from '../baseline-process.mjs';
import { undoAllOnSignals } from '../interrupt.mjs';
import { median } from '../lib.mjs';
import { openBareRunc, withRuntime } from '../suites/runtime.mjs';

const BLOCKS = +(process.env.BLOCKS ?? 16);
const N = +(process.env.N ?? 20);
const BARE = 20;

const medianOf = (values) => median([...values].sort((x, y) => x - y));
/** Standard deviation over mean. */
const spread = (values) => {
  const mean = values.reduce((x, y) => x + y) / values.length;
  return Math.sqrt(values.reduce((x, y) => x + (y - mean) ** 2, 0) / (values.length - 1)) / mean;
};
const pct = (x) => `${(100 * x).toFixed(1)}%`;

undoAllOnSignals();
// A reader that stops reading (`| head`) must not end the probe before its cleanup.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
});
// withRuntime prepares the data directory, which the bare bundle's lower layers come from.
await withRuntime(0, (line) => console.error(line), async (runtime, dataDir) => {
  const base = await startBaselineProcess();
  const bare = openBareRunc(base, dataDir);
  try {
    const rounds = [];
    for (let i = 0; i < 3; i++) await bare.run();
    for (let b = 0; b < BLOCKS; b++) {
      let t = performance.now();
      const made = await Promise.all(Array.from({ length: N }, () => runtime.create({ templateId: 'base', cold: true, init: { accessToken: 'probe' } })));
      const batch = N / ((performance.now() - t) / 1000);
      await Promise.all(made.map((s) => runtime.destroy(s.id)));
      const ms = [];
      for (let k = 0; k < BARE; k++) ms.push((await bare.run()).elapsedMs);
      t = performance.now();
      await Promise.all(Array.from({ length: N }, () => bare.run()));
      const atOnce = N / ((performance.now() - t) / 1000);
      const first10 = ms.slice(0, 10);
      const round = {
        batch,
        'ten, by their sum': 10_000 / first10.reduce((x, y) => x + y),
        [`${BARE}, by their sum`]: (1000 * BARE) / ms.reduce((x, y) => x + y),
        'ten, by their median': 1000 / medianOf(first10),
        [`${BARE}, by their median`]: 1000 / medianOf(ms),
        [`${N} at once`]: atOnce,
      };
      rounds.push(round);
      console.log(`round ${b + 1}: ${Object.entries(round).map(([k, v]) => `${k} ${v.toFixed(1)}/s`).join(', ')}; bare runs (ms) ${ms.map((x) => x.toFixed(0)).join(' ')}`);
    }
    console.log(`the batch spreads by ${pct(spread(rounds.map((r) => r.batch)))} from round to round`);
    for (const k of Object.keys(rounds[0]).slice(1)) {
      console.log(`bare runs, ${k}: spread ${pct(spread(rounds.map((r) => r[k])))}; the batch's ratio to it, ${pct(spread(rounds.map((r) => r.batch / r[k])))}`);
    }
  } finally {
    await bare.close();
    await base.close();
  }
});
