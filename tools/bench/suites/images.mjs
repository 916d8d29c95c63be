// The image store's pull (`--only images`): an image of about 100 MiB in
// four layers (random bytes, text, many small files, a mix), made with umoci
// and pushed with skopeo to Debian's docker-registry on loopback, pulled and
// unpacked into a fresh store, next to `skopeo copy` into an OCI layout plus
// `umoci unpack` of the same image, the tools a user would reach for.
import { ImageStore } from '@paddock/runtime';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../testing/ports.mjs';
import { undoOnInterrupt } from '../interrupt.mjs';
import { closings, MiB, pair, row, settleDisk } from '../lib.mjs';

const run = promisify(execFile);

/** Text that compresses about as well as source code does. */
function text(bytes) {
  const words = Array.from({ length: 512 }, (_, i) => randomBytes(3 + (i % 6)).toString('hex'));
  const picks = randomBytes(bytes);
  const out = [];
  for (let n = 0, i = 0; n < bytes; i += 2) {
    const w = words[picks.readUInt16LE(i % (bytes - 1)) % words.length];
    out.push(w);
    n += w.length + 1;
  }
  return Buffer.from(out.join(' ')).subarray(0, bytes);
}

/** The layers' trees, each in a directory of its own under `dir`. */
function makeLayers(dir) {
  const layers = [];
  const layer = (name, files) => {
    const root = join(dir, name);
    for (const [path, bytes] of files) {
      mkdirSync(join(root, path, '..'), { recursive: true });
      writeFileSync(join(root, path), bytes);
    }
    layers.push(root);
  };
  layer('random', Array.from({ length: 10 }, (_, i) => [`opt/random/${i}.bin`, randomBytes(4 * MiB)]));
  layer('text', Array.from({ length: 30 }, (_, i) => [`usr/share/text/${i}.txt`, text(MiB)]));
  layer('small', Array.from({ length: 2000 }, (_, i) => [`usr/lib/small/${i % 40}/${i}.txt`, text(1024 + (i % 16) * 1024)]));
  layer('mixed', Array.from({ length: 7 }, (_, i) => [`srv/mixed/${i}.dat`, Buffer.concat([randomBytes(MiB), text(MiB)])]));
  return layers;
}

/** docker-registry on 127.0.0.1 with storage under `dir`; resolves with its host once it answers. */
async function startRegistry(dir) {
  const port = await freePort();
  const config = join(dir, 'registry.yml');
  writeFileSync(config, `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'storage')}\nhttp:\n  addr: 127.0.0.1:${port}\n  secret: bench\n`);
  const child = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: 'ignore' });
  const stop = undoOnInterrupt(async () => {
    const exited = new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    child.kill('SIGTERM');
    await exited;
  });
  for (let i = 0; ; i++) {
    if ((await fetch(`http://127.0.0.1:${port}/v2/`).then((r) => r.status, () => 0)) === 200) return { host: `127.0.0.1:${port}`, stop };
    if (i > 200 || child.exitCode !== null) throw new Error('docker-registry did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function imagesSuite({ quick, log }) {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-bench-images-'));
  const closing = closings();
  closing.add(undoOnInterrupt(() => rmSync(dir, { recursive: true, force: true })));
  try {
    log('images: making a ~100 MiB image with umoci');
    const layout = join(dir, 'layout');
    execFileSync('umoci', ['init', '--layout', layout]);
    execFileSync('umoci', ['new', '--image', `${layout}:bench`]);
    for (const tree of makeLayers(join(dir, 'trees'))) execFileSync('umoci', ['insert', '--image', `${layout}:bench`, tree, '/']);
    rmSync(join(dir, 'trees'), { recursive: true });
    const registry = await startRegistry(dir);
    closing.add(registry.stop);
    const ref = `${registry.host}/bench/image:1`;
    execFileSync('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:bench`, `docker://${ref}`]);
    rmSync(layout, { recursive: true });

    let n = 0;
    const fresh = () => join(dir, `run-${n++}`);
    const done = (path, ms) => {
      rmSync(path, { recursive: true, force: true });
      settleDisk();
      return { ms };
    };
    const pull = async () => {
      const store = new ImageStore({ dir: fresh(), idShift: 1_000_000_000 });
      await store.open();
      const t = performance.now();
      await store.pull(ref);
      const ms = performance.now() - t;
      await store.close();
      return done(store.dir, ms);
    };
    const skopeoUmoci = async () => {
      const d = fresh();
      mkdirSync(d);
      const t = performance.now();
      await run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-tls-verify=false', `docker://${ref}`, `oci:${d}/layout:1`]);
      await run('umoci', ['unpack', '--image', `${d}/layout:1`, `${d}/bundle`]);
      return done(d, performance.now() - t);
    };
    log('images: pull and unpack, against skopeo copy + umoci unpack');
    settleDisk();
    const [value, baseline] = await pair([pull, skopeoUmoci], { warmup: 1, iterations: quick ? 3 : 10 });
    return [
      row({ suite: 'images', name: 'pull of a ~100 MiB image (4 layers) from a local registry, unpacked', unit: 'ms', value, baseline, baselineName: '`skopeo copy` + `umoci unpack`', target: { on: 'ratio', op: '<=', value: 1 } }),
    ];
  } finally {
    await closing.run();
  }
}
