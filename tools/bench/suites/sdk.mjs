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
import { alternate, closings, MiB, row, settleDisk, summarize } from '../lib.mjs';
import { serverInHome, startBaselines, startWorkload } from '../processes.mjs';
import { openBareRunc } from './runtime.mjs';

const KEY = 'e2b_' + 'd'.repeat(40);
const PASSES = 6;

export async function sdkSuite({ quick, log }) {
  const passes = quick ? 1 : PASSES;
  /** A pass's share of a row's samples (`full` in a full run, `rough` with --quick). */
  const share = (full, rough) => Math.max(1, Math.round((quick ? rough : full) / passes));
  const concurrent = quick ? 10 : 20;
  const closing = closings();
  try {
    const base = await startBaselines();
    closing.add(base.close);
    const local = localHome();
    closing.add(local.remove);
    const ctx = { base, user: local.user, dir: local.dir, closing };
    // Two servers for the whole suite: the warm one's pool serves the warm
    // creates and the SDK comparison; the cold one has none, so that no
    // refill runs during the live sandbox's phases.
    const warm = await openServer(3, closing);
    const cold = await openServer(0, closing);
    const warmCreates = creates(warm, true, ctx);
    const coldCreates = creates(cold, false, ctx);
    const sbx = await Sandbox.create({ ...cold.opts, timeoutMs: 3600_000 });
    const watch = await watchLatency(sbx, ctx);
    const busy = await busyNeighbour(cold);
    const [commands, output] = [roundTrip(sbx, ctx), stdout(sbx, ctx)];
    const list = await listing(sbx, ctx);
    const transfers = [fileTransfer(sbx, 1, ctx), fileTransfer(sbx, quick ? 64 : 256, ctx)];
    const comparison = await sdkComparison(warm, ctx);
    // The listing sits between the creates and the transfers, so that these do not start right after a batch was killed.
    const phases = [warmCreates, coldCreates, busy, commands, output, list, ...transfers, comparison];
    for (let pass = 0; pass < passes; pass++) {
      if (passes > 1) log(`sdk: pass ${pass + 1} of ${passes}`);
      // The watch takes its few-ms samples after every phase, spread over the whole run.
      for (const phase of phases) {
        await phase.take(pass);
        await watch.take(pass, phases.length);
      }
    }
    const allBareMs = [...coldCreates.bareMs(), ...warmCreates.bareMs()];
    return [coldCreates.rows(allBareMs), busy.rows(), warmCreates.rows(allBareMs), commands.rows(), output.rows(), ...transfers.map((t) => t.rows()), list.rows(), watch.rows(), comparison.rows()].flat();
  } finally {
    await closing.run();
  }

  async function openServer(poolSize, closing) {
    const server = await serverInHome('paddock-bench-sdk-', { warmPoolSize: poolSize, initialApiKey: KEY, metricsIntervalMs: 60_000 });
    closing.add(server.close);
    return { ...server, opts: { apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl } };
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

  /**
   * Sandbox.create + commands.run('true'), alternated with a bare `runc run
   * true` on the same rootfs and a bare spawn of `true`, then batches of
   * `concurrent` creates at once, timed until all have run their first
   * command. The batches' baseline is every bare run of both servers' single
   * creates, as a rate: a batch spreads less than bare runs next to it would.
   */
  function creates(server, pool, { base, user, closing }) {
    const label = pool ? 'warm pool' : 'cold';
    const bare = openBareRunc(base, join(server.home, 'runtime'));
    closing.add(bare.close);
    const createAndRun = async () => {
      const sbx = await Sandbox.create(server.opts);
      await sbx.commands.run('true');
      return sbx;
    };
    // The kills and the pool's refill come after the timing, and before the bare run that follows.
    const afterwards = async (sandboxes) => {
      await Promise.all(sandboxes.map((s) => s.kill()));
      if (pool) await server.poolReady();
    };
    const single = alternate([
      async () => {
        const t = performance.now();
        const sbx = await createAndRun();
        const ms = performance.now() - t;
        await afterwards([sbx]);
        return { ms };
      },
      bare.run,
      () => base.spawn('/bin/true', [], user),
    ]);
    const batches = alternate(
      [
        async () => {
          const t = performance.now();
          const made = await Promise.all(Array.from({ length: concurrent }, createAndRun));
          const ms = performance.now() - t;
          await afterwards(made);
          return { ms, count: concurrent };
        },
      ],
      { rate: true },
    );
    return {
      async take(pass) {
        log(`sdk: create + first command, ${label}`);
        if (pool) await server.poolReady();
        await single.take({ warmup: pass ? 1 : 2, iterations: share(pool ? 100 : 45, pool ? 12 : 9) });
        log(`sdk: ${concurrent} concurrent creates, ${label}`);
        await batches.take({ warmup: 0, iterations: share(2 * PASSES, 1) });
      },
      bareMs: () => single.result()[1].samples,
      rows(allBareMs) {
        const [value, bareRuns, spawned] = single.result();
        const name = `Sandbox.create + commands.run('true'), ${label}`;
        const target = { on: 'value', op: '<=', value: pool ? 25 : 250 };
        const bareRate = summarize(allBareMs.map((ms) => 1000 / ms), { rate: true });
        return [
          row({ suite: 'sdk', name, unit: 'ms', value, baseline: bareRuns, baselineName: 'bare `runc run true`, same rootfs', target }),
          row({ suite: 'sdk', name, unit: 'ms', value, baseline: spawned, baselineName: "child_process.spawn('true')" }),
          row({ suite: 'sdk', name: `${concurrent} concurrent creates + first command, ${label}`, unit: 'sandboxes/s', value: batches.result()[0], baseline: bareRate, baselineName: 'bare `runc run true` one after another' }),
        ];
      },
    };
  }

  /**
   * A cold create while another sandbox keeps every CPU busy, alternated with
   * the same create while that sandbox is paused: what a saturating neighbour
   * costs a create, with the runtime's CPU weights.
   */
  async function busyNeighbour(server) {
    const neighbour = await Sandbox.create({ ...server.opts, timeoutMs: 3600_000 });
    await neighbour.commands.run(`for i in $(seq ${2 * availableParallelism()}); do (while :; do :; done) >/dev/null 2>&1 & done`);
    await neighbour.pause();
    const createAndRun = async () => {
      const t = performance.now();
      const sbx = await Sandbox.create(server.opts);
      await sbx.commands.run('true');
      const ms = performance.now() - t;
      await sbx.kill();
      return { ms };
    };
    const busy = async () => {
      await neighbour.connect();
      // Time for the spinning shells to fill the CPUs again.
      await new Promise((r) => setTimeout(r, 300));
      return createAndRun().finally(() => neighbour.pause());
    };
    const pairs = alternate([busy, createAndRun]);
    return {
      async take(pass) {
        log('sdk: cold create while another sandbox keeps the CPUs busy');
        await pairs.take({ warmup: pass ? 0 : 1, iterations: share(24, 3) });
      },
      rows() {
        const [value, baseline] = pairs.result();
        const name = "Sandbox.create + commands.run('true'), cold, while another sandbox keeps every CPU busy";
        return [row({ suite: 'sdk', name, unit: 'ms', value, baseline, baselineName: 'the same create while that sandbox is paused' })];
      },
    };
  }

  function roundTrip(sbx, { base, user }) {
    const pairs = alternate([() => sbx.commands.run('true'), () => base.spawn('/bin/bash', ['-l', '-c', 'true'], user)]);
    return {
      async take(pass) {
        log('sdk: command round trip');
        await pairs.take({ warmup: pass ? 2 : 5, iterations: share(150, 20) });
      },
      rows() {
        const [value, baseline] = pairs.result();
        return [row({ suite: 'sdk', name: "commands.run('true') on a live sandbox", unit: 'ms', value, baseline, baselineName: 'local spawn of `bash -l -c true`', target: { on: 'ratio', op: '<=', value: 1.5 } })];
      },
    };
  }

  /**
   * `commands.run` keeps a command's whole output for its result, as E2B's
   * does; each sample's output is collected once the sample is timed, so that
   * the next one starts from the same heap (the suite runs with --expose-gc).
   */
  function stdout(sbx, { base, user }) {
    const size = quick ? 64 : 256;
    const head = `head -c ${size}M /dev/zero`;
    const pairs = alternate(
      [
        async () => {
          const t = performance.now();
          let bytes = 0;
          await sbx.commands.run(head, { onStdout: (d) => void (bytes += d.length), timeoutMs: 0 });
          const ms = performance.now() - t;
          globalThis.gc();
          return { ms, bytes };
        },
        () => base.pipe('/usr/bin/head', ['-c', `${size}M`, '/dev/zero'], user),
      ],
      { rate: true },
    );
    return {
      async take() {
        log('sdk: stdout throughput');
        await pairs.take({ warmup: 1, iterations: share(32, 2) });
      },
      rows() {
        const [value, baseline] = pairs.result();
        return [row({ suite: 'sdk', name: `stdout throughput (${head})`, unit: 'MiB/s', value, baseline, baselineName: 'the same command piped locally', target: { on: 'ratio', op: '>=', value: 0.25 } })];
      },
    };
  }

  /** Upload and download of `mib` MiB, next to loopback TCP and (downloads) an fs copy. */
  function fileTransfer(sbx, mib, { base, dir }) {
    const src = join(dir, `payload-${mib}.bin`);
    // Sent from memory, as the loopback baseline sends; made at the first pass, not held through the phases before.
    let payload = null;
    const tcp = () => base.loopbackTcp(mib * MiB);
    const up = alternate([async () => (await sbx.files.write(`up-${mib}.bin`, payload), mib * MiB), tcp], { rate: true });
    const read = async () => {
      let bytes = 0;
      for await (const c of await sbx.files.read(`up-${mib}.bin`, { format: 'stream' })) bytes += c.length;
      if (bytes !== mib * MiB) throw new Error(`read ${bytes} bytes of ${mib * MiB}`);
      return bytes;
    };
    const copy = { fn: () => base.copyFile(src, `${src}.copy`), every: mib === 1 ? 1 : 3 };
    const down = alternate([read, tcp, copy], { rate: true });
    const iterations = mib === 1 ? share(450, 60) : share(62, 2);
    return {
      async take() {
        log(`sdk: file transfer ${mib} MiB`);
        if (!payload) writeFileSync(src, (payload = randomBytes(mib * MiB)));
        settleDisk();
        await up.take({ warmup: 2, iterations });
        settleDisk();
        await down.take({ warmup: 1, iterations });
        settleDisk();
      },
      rows() {
        const [upRate, tcpUp] = up.result();
        const [downRate, tcpDown, copied] = down.result();
        const target = { on: 'ratio', op: '>=', value: 0.5 };
        return [
          row({ suite: 'sdk', name: `files.write ${mib} MiB`, unit: 'MiB/s', value: upRate, baseline: tcpUp, baselineName: 'loopback TCP in Node', target }),
          row({ suite: 'sdk', name: `files.read ${mib} MiB`, unit: 'MiB/s', value: downRate, baseline: tcpDown, baselineName: 'loopback TCP in Node', target }),
          row({ suite: 'sdk', name: `files.read ${mib} MiB`, unit: 'MiB/s', value: downRate, baseline: copied, baselineName: 'fs stream copy' }),
        ];
      },
    };
  }

  async function listing(sbx, { base, dir }) {
    await sbx.commands.run('mkdir -p many && cd many && seq -f "f%05g" 1 10000 | xargs touch');
    const localDir = join(dir, 'many');
    mkdirSync(localDir);
    for (let i = 0; i < 10_000; i++) writeFileSync(join(localDir, `f${i}`), '');
    const list = async () => {
      const entries = await sbx.files.list('many');
      if (entries.length !== 10_000) throw new Error(`listed ${entries.length}`);
    };
    const pairs = alternate([list, () => base.listDir(localDir)]);
    return {
      async take(pass) {
        log(`sdk: list of 10 000 entries`);
        await pairs.take({ warmup: pass ? 1 : 2, iterations: share(48, 3) });
      },
      rows() {
        const [value, baseline] = pairs.result();
        return [row({ suite: 'sdk', name: 'files.list of 10 000 entries', unit: 'ms', value, baseline, baselineName: 'readdir + lstat each, in process' })];
      },
    };
  }

  /**
   * files.write → watchDir event on a watch kept open for the whole suite,
   * next to the same through a small local HTTP service that wakes threads
   * across processes as the path through the proxy and envd does.
   */
  async function watchLatency(sbx, { base, dir, closing }) {
    await sbx.commands.run('mkdir -p watched');
    let waiting = null;
    let ended = null;
    const handle = await sbx.files.watchDir('watched', (e) => e.name === waiting?.name && e.type === 'write' && waiting.resolve(), {
      timeoutMs: 0,
      onExit: (err) => waiting?.reject((ended = new Error(`the watch ended${err ? `: ${err.message}` : ''}`))),
    });
    closing.add(() => handle.stop());
    const localWatch = await base.localWatch(join(dir, 'watched'));
    closing.add(localWatch.close);
    let written = 0;
    const sample = async () => {
      const name = `w${written++}`;
      const seen = new Promise((resolve, reject) => (ended ? reject(ended) : (waiting = { name, resolve, reject })));
      // Awaited together: a failed write (the run stopped) leaves no rejection unheard.
      await Promise.all([sbx.files.write(`watched/${name}`, 'x'), seen]);
    };
    const pairs = alternate([sample, () => localWatch.sample()]);
    let blocks = 0;
    return {
      async take(pass, perPass) {
        await pairs.take({ warmup: blocks++ ? 1 : 2, iterations: Math.max(1, Math.round(share(450, 90) / perPass)) });
      },
      rows() {
        const [value, baseline] = pairs.result();
        return [row({ suite: 'sdk', name: 'files.write → watchDir event (includes the write)', unit: 'ms', value, baseline, baselineName: 'the same through a local HTTP service (write, fs.watch, streamed event)' })];
      },
    };
  }

  /** The same workload through @paddock/sdk and the official e2b SDK, each in its own process, from a full warm pool. */
  async function sdkComparison(server, { closing }) {
    const ours = await startWorkload('paddock', server.opts);
    closing.add(ours.close);
    const theirs = await startWorkload('e2b', server.opts);
    closing.add(theirs.close);
    const timed = (sdk) => async () => {
      await server.poolReady();
      return { ms: await sdk.run() };
    };
    const pairs = alternate([timed(ours), timed(theirs)]);
    return {
      async take(pass) {
        log('sdk: the same workload through @paddock/sdk and the official e2b SDK');
        await pairs.take({ warmup: pass ? 1 : 2, iterations: share(50, 6) });
        await server.poolReady();
      },
      rows() {
        const [value, baseline] = pairs.result();
        const name = 'create, write + read 1 MiB, run `echo`, kill: @paddock/sdk';
        return [row({ suite: 'sdk', name, unit: 'ms', value, baseline, baselineName: 'the same through the official e2b SDK, each SDK in a process of its own', target: { on: 'ratio', op: '<=', value: 1.0 } })];
      },
    };
  }
}
