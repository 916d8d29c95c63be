// What users see: the whole service (control API, proxy, runtime, envd)
// driven through @paddock/sdk, and the same workload through the official
// e2b SDK, each next to a baseline measured in the same run.
//
// A full run takes each row's samples in passes over all the phases, so that
// a stretch in which the shared machine runs slow or fast falls on a part of
// every row's samples rather than on all of one row's.
import { Sandbox } from '@paddock/sdk';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { undoOnInterrupt } from '../interrupt.mjs';
import { allAtOnce, alternate, closings, eventWaiter, failures, MiB, row, settleDisk, summarize } from '../lib.mjs';
import { serverInHome, startBaselines, startWorkload } from '../processes.mjs';
import { openBareRunc } from './runtime.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const PASSES = 6;
const ratioAtMost = (value) => ({ on: 'ratio', op: '<=', value });
const ratioAtLeast = (value) => ({ on: 'ratio', op: '>=', value });
const sdkRow = (name, unit, value, [baseline, baselineName, target]) => row({ suite: 'sdk', name, unit, value, baseline, baselineName, target });

/** Sandbox.create + commands.run('true'): what a user waits for until a new sandbox has run something. */
async function createAndRun(opts) {
  const sbx = await Sandbox.create(opts);
  await sbx.commands.run('true');
  return sbx;
}

/** createAndRun, timed; `after(sandbox)` (its kill, a refill) runs once it is timed. */
async function timedCreate(opts, after) {
  const t = performance.now();
  const sbx = await createAndRun(opts);
  const ms = performance.now() - t;
  await after(sbx);
  return { ms };
}

/**
 * Local commands run as envd runs them, as uid 1000 in a home of its own
 * that holds what a sandbox user's home holds (/etc/skel, which `bash -l` reads).
 */
function localHome() {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-bench-local-'));
  const remove = undoOnInterrupt(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o755);
  const home = join(dir, 'home');
  mkdirSync(home);
  if (existsSync('/etc/skel')) cpSync('/etc/skel', home, { recursive: true });
  for (const f of ['', ...readdirSync(home, { recursive: true })]) chownSync(join(home, f), 1000, 1000);
  return { dir, user: { uid: 1000, gid: 1000, home }, remove };
}

export async function sdkSuite({ quick, log }) {
  const passes = quick ? 1 : PASSES;
  /** A pass's share of a row's samples (`full` in a full run, `rough` with --quick). */
  const share = (full, rough) => Math.max(1, Math.round((quick ? rough : full) / passes));
  const concurrent = quick ? 10 : 20;
  const size = quick ? 64 : 256;
  const closing = closings();

  /**
   * One alternation taken a pass at a time: `take(pass)` logs `message`, runs
   * `before`, takes the pass's share and runs `after`; `rows()` gives `rows(summaries)`.
   */
  const phase = (message, fns, { rate, warmup = 2, full, rough, before, after, rows }) => {
    const a = alternate(fns, { rate });
    return {
      async take(pass) {
        log(`sdk: ${message}`);
        await before?.();
        await a.take({ warmup: pass ? 1 : warmup, iterations: share(full, rough) });
        await after?.();
      },
      result: a.result,
      rows: () => rows(a.result()),
    };
  };

  async function openServer(poolSize) {
    const server = await serverInHome('paddock-bench-sdk-', { warmPoolSize: poolSize, initialApiKey: KEY, metricsIntervalMs: 60_000 });
    closing.add(server.close);
    return { ...server, opts: { apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl } };
  }

  try {
    const base = await startBaselines();
    closing.add(base.close);
    const local = localHome();
    closing.add(local.remove);
    const { user, dir } = local;
    // Two servers for the whole suite: the warm one's pool serves the warm
    // creates and the SDK comparison; the cold one has none, so that no
    // refill runs during the live sandbox's phases.
    const warm = await openServer(3);
    const cold = await openServer(0);

    /**
     * Single creates alternated with a bare `runc run true` on the same rootfs
     * and a bare spawn of `true`, then batches of `concurrent` creates at once,
     * timed until all have run their first command. The kills and the pool's
     * refill come after the timing and before the next sample. The batches'
     * baseline is every bare run of both servers' single creates, as a rate.
     */
    const creates = (server, pool) => {
      const label = pool ? 'warm pool' : 'cold';
      const bare = openBareRunc(base, join(server.home, 'runtime'));
      closing.add(bare.close);
      const after = async (...made) => {
        await Promise.all(made.map((s) => s.kill()));
        if (pool) await server.poolReady();
      };
      const before = () => pool && server.poolReady();
      const name = `Sandbox.create + commands.run('true'), ${label}`;
      const single = phase(`create + first command, ${label}`, [() => timedCreate(server.opts, after), bare.run, () => base.spawn('/bin/true', [], user)], {
        full: pool ? 100 : 45,
        rough: pool ? 12 : 9,
        before,
        rows: ([value, bareRuns, spawned]) => [
          sdkRow(name, 'ms', value, [bareRuns, 'bare `runc run true`, same rootfs', { on: 'value', op: '<=', value: pool ? 20 : 200 }]),
          sdkRow(name, 'ms', value, [spawned, "child_process.spawn('true')"]),
        ],
      });
      // A rate of the creates that succeeded; those that failed are named in the row.
      const failed = [];
      const batch = async () => {
        const t = performance.now();
        const { made, failed: f } = await allAtOnce(concurrent, () => createAndRun(server.opts));
        const ms = performance.now() - t;
        await after(...made);
        failed.push(...f);
        return { ms, count: made.length };
      };
      const batches = phase(`${concurrent} concurrent creates, ${label}`, [batch], { rate: true, warmup: 0, full: 2 * PASSES, rough: 1, before, rows: () => [] });
      return {
        async take(pass) {
          await single.take(pass);
          await batches.take(pass);
        },
        bareMs: () => single.result()[1].samples,
        rows: (allBareMs) => [
          ...single.rows(),
          row({
            suite: 'sdk',
            name: `${concurrent} concurrent creates + first command, ${label}`,
            unit: 'sandboxes/s',
            value: batches.result()[0],
            baseline: summarize(allBareMs.map((ms) => 1000 / ms), { rate: true }),
            baselineName: 'bare `runc run true` one after another',
            failed: failures(failed, concurrent * batches.result()[0].n),
          }),
        ],
      };
    };
    const warmCreates = creates(warm, true);
    const coldCreates = creates(cold, false);

    // A cold create while another sandbox keeps every CPU busy, against the
    // same while that sandbox idles. Its spinning shells are started and
    // killed by command rather than frozen: on a saturated host, runc could
    // not freeze them in time ('unable to freeze') and the pause failed.
    const neighbour = await Sandbox.create({ ...cold.opts, timeoutMs: 3600_000 });
    const coldCreate = () => timedCreate(cold.opts, (s) => s.kill());
    const busyCreate = async () => {
      await neighbour.commands.run(`for i in $(seq ${2 * availableParallelism()}); do (while :; do :; done) >/dev/null 2>&1 & done`);
      // Time for the spinning shells to fill the CPUs.
      await new Promise((r) => setTimeout(r, 300));
      // The bracket keeps pkill's own shell, whose command line holds the pattern, out of what it matches.
      return coldCreate().finally(() => neighbour.commands.run("pkill -f 'whil[e] :'"));
    };
    const busy = phase('cold create while another sandbox keeps the CPUs busy', [busyCreate, coldCreate], {
      warmup: 1,
      full: 24,
      rough: 3,
      rows: ([value, idle]) => [sdkRow("Sandbox.create + commands.run('true'), cold, while another sandbox keeps every CPU busy", 'ms', value, [idle, 'the same create while that sandbox idles'])],
    });

    const sbx = await Sandbox.create({ ...cold.opts, timeoutMs: 3600_000 });
    const commands = phase('command round trip', [() => sbx.commands.run('true'), () => base.spawn('/bin/bash', ['-l', '-c', 'true'], user)], {
      warmup: 5,
      full: 150,
      rough: 20,
      rows: ([value, local]) => [sdkRow("commands.run('true') on a live sandbox", 'ms', value, [local, 'local spawn of `bash -l -c true`', ratioAtMost(1.5)])],
    });

    // commands.run keeps a command's whole output for its result, as E2B's
    // does; it is collected once each sample is timed, so that every sample
    // starts from the same heap (the suite runs with --expose-gc).
    const head = `head -c ${size}M /dev/zero`;
    const stdoutOnce = async () => {
      const t = performance.now();
      let bytes = 0;
      await sbx.commands.run(head, { onStdout: (d) => void (bytes += d.length), timeoutMs: 0 });
      const ms = performance.now() - t;
      globalThis.gc();
      return { ms, bytes };
    };
    const output = phase('stdout throughput', [stdoutOnce, () => base.pipe('/usr/bin/head', ['-c', `${size}M`, '/dev/zero'], user)], {
      rate: true,
      warmup: 1,
      full: 32,
      rough: 2,
      rows: ([value, pipe]) => [sdkRow(`stdout throughput (${head})`, 'MiB/s', value, [pipe, 'the same command piped locally', ratioAtLeast(0.25)])],
    });

    await sbx.commands.run('mkdir -p many && cd many && seq -f "f%05g" 1 10000 | xargs touch');
    mkdirSync(join(dir, 'many'));
    for (let i = 0; i < 10_000; i++) writeFileSync(join(dir, 'many', `f${i}`), '');
    const list = async () => {
      const entries = await sbx.files.list('many');
      if (entries.length !== 10_000) throw new Error(`listed ${entries.length}`);
    };
    const listing = phase('list of 10 000 entries', [list, () => base.listDir(join(dir, 'many'))], {
      full: 48,
      rough: 3,
      rows: ([value, local]) => [sdkRow('files.list of 10 000 entries', 'ms', value, [local, 'readdir + lstat each, in process'])],
    });

    /** Upload and download of `mib` MiB, next to loopback TCP and (downloads) an fs copy, from memory as loopback sends. */
    function fileTransfer(sbx, mib) {
      const src = join(dir, `payload-${mib}.bin`);
      let payload = null;
      const tcp = () => base.loopbackTcp(mib * MiB);
      const read = async () => {
        let bytes = 0;
        for await (const c of await sbx.files.read(`up-${mib}.bin`, { format: 'stream' })) bytes += c.length;
        if (bytes !== mib * MiB) throw new Error(`read ${bytes} bytes of ${mib * MiB}`);
        return bytes;
      };
      const copy = { fn: () => base.copyFile(src, `${src}.copy`), every: mib === 1 ? 1 : 3 };
      const counts = mib === 1 ? { full: 450, rough: 60 } : { full: 62, rough: 2 };
      const [up, down] = [
        phase(`file transfer ${mib} MiB, write`, [async () => (await sbx.files.write(`up-${mib}.bin`, payload), mib * MiB), tcp], {
          rate: true,
          ...counts,
          // Made at the first pass, not held through the phases before; each direction starts once earlier writes are on disk.
          before() {
            if (!payload) writeFileSync(src, (payload = randomBytes(mib * MiB)));
            settleDisk();
          },
          rows: ([value, loopback]) => [sdkRow(`files.write ${mib} MiB`, 'MiB/s', value, [loopback, 'loopback TCP in Node', ratioAtLeast(0.5)])],
        }),
        phase(`file transfer ${mib} MiB, read`, [read, tcp, copy], {
          rate: true,
          warmup: 1,
          ...counts,
          before: settleDisk,
          rows: ([value, loopback, copied]) => [
            sdkRow(`files.read ${mib} MiB`, 'MiB/s', value, [loopback, 'loopback TCP in Node', ratioAtLeast(0.5)]),
            sdkRow(`files.read ${mib} MiB`, 'MiB/s', value, [copied, 'fs stream copy']),
          ],
        }),
      ];
      return {
        async take(pass) {
          await up.take(pass);
          await down.take(pass);
          settleDisk();
        },
        rows: () => [...up.rows(), ...down.rows()],
      };
    }

    /**
     * files.write → watchDir event on a watch kept open for the whole suite,
     * next to the same through a small local HTTP service that wakes threads
     * across processes as the path through the proxy and envd does.
     */
    async function watchLatency(sbx, localDir) {
      await sbx.commands.run('mkdir -p watched');
      const events = eventWaiter();
      const handle = await sbx.files.watchDir('watched', (e) => e.type === 'write' && events.saw(e.name), {
        timeoutMs: 0,
        onExit: (err) => events.end(new Error(`the watch ended${err ? `: ${err.message}` : ''}`)),
      });
      closing.add(() => handle.stop());
      const localWatch = await base.localWatch(localDir);
      closing.add(localWatch.close);
      let written = 0;
      const sample = async () => {
        const name = `w${written++}`;
        // Awaited together: a failed write (the run stopped) leaves no rejection unheard.
        await Promise.all([sbx.files.write(`watched/${name}`, 'x'), events.expect(name)]);
      };
      const pairs = alternate([sample, () => localWatch.sample()]);
      return {
        async take(pass, blocks) {
          await pairs.take({ warmup: 1, iterations: Math.max(1, Math.round(share(450, 90) / blocks)) });
        },
        rows() {
          const [value, local] = pairs.result();
          return [sdkRow('files.write → watchDir event (includes the write)', 'ms', value, [local, 'the same through a local HTTP service (write, fs.watch, streamed event)'])];
        },
      };
    }
    const transfers = [1, size].map((mib) => fileTransfer(sbx, mib));

    const ours = await startWorkload('paddock', warm.opts);
    closing.add(ours.close);
    const theirs = await startWorkload('e2b', warm.opts);
    closing.add(theirs.close);
    const workload = (sdk) => async () => (await warm.poolReady(), { ms: await sdk.run() });
    const comparison = phase('the same workload through @paddock/sdk and the official e2b SDK', [workload(ours), workload(theirs)], {
      full: 50,
      rough: 6,
      // The last sample's refill does not run into the next phase.
      after: () => warm.poolReady(),
      rows: ([value, e2b]) => [
        sdkRow('create, write + read 1 MiB, run `echo`, kill: @paddock/sdk', 'ms', value, [e2b, 'the same through the official e2b SDK, each SDK in a process of its own', ratioAtMost(1)]),
      ],
    });

    const watch = await watchLatency(sbx, join(dir, 'watched'));
    // The listing sits between the creates and the transfers, so that these do not start right after a batch was killed.
    const phases = [warmCreates, coldCreates, busy, commands, output, listing, ...transfers, comparison];
    for (let pass = 0; pass < passes; pass++) {
      if (passes > 1) log(`sdk: pass ${pass + 1} of ${passes}`);
      // The watch takes its few-ms samples after every phase, spread over the whole run.
      for (const p of phases) {
        await p.take(pass);
        await watch.take(pass, phases.length);
      }
    }
    const allBareMs = [...coldCreates.bareMs(), ...warmCreates.bareMs()];
    return [coldCreates.rows(allBareMs), busy.rows(), warmCreates.rows(allBareMs), commands.rows(), output.rows(), ...transfers.map((t) => t.rows()), listing.rows(), watch.rows(), comparison.rows()].flat();
  } finally {
    await closing.run();
  }
}
