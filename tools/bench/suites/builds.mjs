// Template builds (`--only builds`), as a user of the official e2b SDK runs
// them: a template of three steps (a RUN, a COPY of 10 MiB, a RUN) built on
// the base template, next to the same steps done by hand with runc on the
// same layers (a container per step on an overlay of the layers so far, the
// file copied into its upper, each upper copied out as the next layer); the
// same template built again from the cache; and a sandbox of the built
// template next to one of base.
//
// The first step is an `apt-get install`; a RUN that writes files
// stands in for it, so that the row measures Paddock and not a mirror's
// speed (builds reach the mirror: compat/test/builds.test.ts "aptInstall").
import { Sandbox, Template } from 'e2b';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { DEFAULT_ID_SHIFT, ID_RANGE } from '@paddock/runtime';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { undoOnInterrupt } from '../interrupt.mjs';
import { closings, MiB, pair, row, summarize } from '../lib.mjs';
import { serverInHome } from '../processes.mjs';

const KEY = 'e2b_' + 'b'.repeat(40);
const FIRST = 'mkdir -p /opt/bench && seq 1 300000 > /opt/bench/numbers';
const LAST = 'sha256sum /opt/bench/big.bin > /opt/bench/sum';

const template = (context) =>
  Template({ fileContextPath: context })
    .fromTemplate('base')
    .runCmd(FIRST, { user: 'root' })
    .copy('big.bin', '/opt/bench/big.bin', { user: 'root' })
    .runCmd(LAST, { user: 'root' });

/**
 * The steps by hand: for each, an overlay of the layers so far with a fresh
 * upper, `runc run` of the command (or the file copied into the upper), and
 * the upper copied out with `cp -a` as the next layer.
 */
function byHand(baseLayers, context, work) {
  let n = 0;
  return async () => {
    const dir = join(work, `hand-${n++}`);
    const t = performance.now();
    const layers = [...baseLayers];
    const steps = [{ cmd: FIRST }, { copy: join(context, 'big.bin') }, { cmd: LAST }];
    for (const [i, step] of steps.entries()) {
      const bundle = join(dir, `step-${i}`);
      for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(bundle, d), { recursive: true });
      // The layers' files belong to the sandboxes' id range: the container's root is that range's, as a sandbox's is.
      chownSync(join(bundle, 'upper'), DEFAULT_ID_SHIFT, DEFAULT_ID_SHIFT);
      execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${layers.join(':')},upperdir=${bundle}/upper,workdir=${bundle}/work`, `${bundle}/rootfs`]);
      try {
        if (step.copy) {
          mkdirSync(join(bundle, 'upper/opt/bench'), { recursive: true });
          cpSync(step.copy, join(bundle, 'upper/opt/bench/big.bin'));
          for (const f of ['upper/opt', 'upper/opt/bench', 'upper/opt/bench/big.bin']) chownSync(join(bundle, f), DEFAULT_ID_SHIFT, DEFAULT_ID_SHIFT);
        } else {
          execFileSync('runc', ['spec', '--bundle', bundle]);
          const config = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8'));
          Object.assign(config.process, { terminal: false, args: ['/bin/sh', '-c', step.cmd], rlimits: [] });
          config.root.readonly = false;
          const map = [{ containerID: 0, hostID: DEFAULT_ID_SHIFT, size: ID_RANGE }];
          Object.assign(config.linux, { uidMappings: map, gidMappings: map });
          config.linux.namespaces.push({ type: 'user' });
          writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
          execFileSync('runc', ['--root', join(dir, 'runc'), 'run', '--bundle', bundle, `bench-build-${process.pid}-${n}-${i}`]);
        }
      } finally {
        execFileSync('umount', [join(bundle, 'rootfs')]);
      }
      const layer = join(dir, `layer-${i}`);
      execFileSync('cp', ['-a', join(bundle, 'upper'), layer]);
      layers.unshift(layer);
    }
    const ms = performance.now() - t;
    rmSync(dir, { recursive: true, force: true });
    return { ms };
  };
}

export async function buildsSuite({ quick, log }) {
  const closing = closings();
  const work = mkdtempSync(join(tmpdir(), 'paddock-bench-builds-'));
  // The by-hand containers' root (an id of the sandboxes' range) passes through to their bundles.
  chmodSync(work, 0o711);
  closing.add(undoOnInterrupt(() => rmSync(work, { recursive: true, force: true })));
  try {
    const server = await serverInHome('paddock-bench-builds-', { warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
    closing.add(server.close);
    Object.assign(process.env, { E2B_API_URL: server.apiUrl, E2B_SANDBOX_URL: server.proxyUrl, E2B_API_KEY: KEY });
    const context = join(work, 'context');
    mkdirSync(context);
    writeFileSync(join(context, 'big.bin'), randomBytes(10 * MiB));

    // The base template's layers, top-most first, where the server's image store has them.
    const { image } = JSON.parse(readFileSync(join(server.home, 'runtime/templates/base/meta.json'), 'utf8'));
    const layersDir = process.env.PADDOCK_IMAGES_DIR ?? join(server.home, 'runtime/layers');
    const baseLayers = image.diffIds.map((d) => join(layersDir, 'sha256', d.slice('sha256:'.length), 'fs')).reverse();

    let builds = 0;
    const build = (skipCache) => async () => {
      const t = performance.now();
      await Template.build(template(context), `bench-built-${skipCache ? builds++ : 'cached'}`, { skipCache });
      return { ms: performance.now() - t };
    };
    log('builds: a 3-step template, no cache, against the steps by hand with runc');
    const [uncached, hand] = await pair([build(true), byHand(baseLayers, context, work)], { warmup: 1, iterations: quick ? 2 : 8 });

    log('builds: the same template again, from the cache');
    await build(false)();
    const cachedMs = [];
    for (let i = 0; i < (quick ? 3 : 10); i++) cachedMs.push((await build(false)()).ms);

    log('builds: create + first command from the built template, against from base');
    const createAndRun = (templateId) => async () => {
      const t = performance.now();
      const sbx = await Sandbox.create(templateId);
      await sbx.commands.run('true');
      const ms = performance.now() - t;
      await sbx.kill();
      return { ms };
    };
    const [fromBuilt, fromBase] = await pair([createAndRun('bench-built-cached'), createAndRun('base')], { warmup: 1, iterations: quick ? 4 : 20 });

    return [
      row({ suite: 'builds', name: 'Template.build of 3 steps (RUN, COPY 10 MiB, RUN), no cache', unit: 'ms', value: uncached, baseline: hand, baselineName: 'the steps by hand: runc per step on the same layers, cp -a of each upper', target: { on: 'ratio', op: '<=', value: 1.2 } }),
      row({ suite: 'builds', name: 'Template.build of the same template, every step cached', unit: 'ms', value: summarize(cachedMs), baseline: uncached, baselineName: 'the same build, no cache', target: { on: 'value', op: '<=', value: 1000 } }),
      row({ suite: 'builds', name: "Sandbox.create + commands.run('true') from the built template, cold", unit: 'ms', value: fromBuilt, baseline: fromBase, baselineName: 'the same from base, cold' }),
    ];
  } finally {
    await closing.run();
  }
}
