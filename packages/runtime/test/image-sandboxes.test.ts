// Sandboxes from images in a registry: images this test builds (a scratch
// image with one static busybox, an Alpine-like musl image, a multi-layer
// image with a whiteout and an opaque directory) are pushed to a local
// registry (Debian's docker-registry), made templates with
// templateFromImage, and run: the runtime conformance suite runs in each of
// the first two, and files, environment and layers are checked in each.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTrue, warmUpEnvd } from '../src/envd-link.js';
import { runtimeConformance } from './conformance.js';
import { clients, exec, testRuntime, TOKEN, type TestRuntime } from './harness.js';
import { startRegistry, type TestRegistry } from './registry.js';
import { pushTestImages, TEST_IMAGES, type TestImage } from './test-images.js';
import { existsSync, readdirSync } from 'node:fs';

let registry: TestRegistry;
let layoutDir: string;
let t: TestRuntime;
let refs: Record<TestImage, string>;

beforeAll(async () => {
  registry = await startRegistry();
  layoutDir = mkdtempSync(join(tmpdir(), 'paddock-image-sandboxes-'));
  refs = await pushTestImages(registry, layoutDir);
  t = await testRuntime({ warmPoolSize: 0 });
  for (const tag of TEST_IMAGES) await t.runtime.templateFromImage(`img-${tag}`, refs[tag]);
}, 300_000);

afterAll(async () => {
  await t?.teardown();
  await registry?.stop();
  if (layoutDir) rmSync(layoutDir, { recursive: true, force: true });
});

/** The suite's runtime is the one of this file, whose teardown runs after all suites. */
const shared = (templateId: string) => async () => ({ runtime: t.runtime, templateId, teardown: async () => undefined });
runtimeConformance('RuncRuntime, a scratch image with one static busybox', shared('img-scratch'));
runtimeConformance('RuncRuntime, a musl image', shared('img-musl'));

test("a scratch image's sandbox runs its busybox with the image's environment; nothing of envd's is seen", async () => {
  const { id } = await t.runtime.create({ templateId: 'img-scratch', init: { accessToken: TOKEN } });
  const res = await exec(t.runtime, id, 'echo $PATH $IMAGE; id -u; readlink /proc/self/exe; pwd; ls /bin/bash 2>&1 || echo no-bash');
  expect(res.stdout.split('\n')).toEqual(['/bin scratch', '0', '/bin/busybox', '/root', expect.stringContaining('No such file'), 'no-bash', '']);
  await t.runtime.destroy(id);
});

test('the warm-up of pooled sandboxes runs a login shell where there is one, /bin/true where not, and stops where neither runs', async () => {
  const { id } = await t.runtime.create({ templateId: 'img-scratch' });
  const endpoint = t.runtime.envdEndpoint(id);
  if (!('socketPath' in endpoint)) throw new Error('expected a unix socket endpoint');
  // envd runs a login shell as /bin/sh in an image without bash.
  await expect(warmUpEnvd(endpoint.socketPath, 2)).resolves.toBe(4);
  await exec(t.runtime, id, 'rm /bin/sh');
  await expect(runTrue(endpoint.socketPath, 'json', { cmd: '/bin/bash', args: ['-l', '-c', 'true'] })).rejects.toThrow(/neither \/bin\/bash nor \/bin\/sh/);
  await expect(warmUpEnvd(endpoint.socketPath, 2)).resolves.toBe(4);
  await clients(t.runtime, id).fs.remove({ path: '/bin/true' });
  await expect(warmUpEnvd(endpoint.socketPath)).resolves.toBe(0);
  await t.runtime.destroy(id);
});

test("a musl image's sandbox runs as the image's user, and its programs on musl", async () => {
  const { id } = await t.runtime.create({ templateId: 'img-musl', init: { accessToken: TOKEN } });
  const res = await exec(t.runtime, id, 'id -u; echo $IMAGE; pwd; hello');
  expect(res.stdout).toBe('1000\nmusl\n/home/user\nhello from musl\n');
  await t.runtime.destroy(id);
});

test("a multi-layer image's whiteout and opaque directory hide what the lower layer had", async () => {
  const { id } = await t.runtime.create({ templateId: 'img-layers', init: { accessToken: TOKEN } });
  const res = await exec(t.runtime, id, 'ls /data; echo --; ls /data/old');
  expect(res.stdout).toBe('kept\nold\n--\nafter\n');
  await t.runtime.destroy(id);
});

test('an image that does not exist, or a template id taken, is refused clearly', async () => {
  await expect(t.runtime.templateFromImage('img-missing', `${registry.host}/paddock-test/nothing:here`)).rejects.toMatchObject({
    kind: 'not_found',
    message: expect.stringContaining('paddock-test/nothing'),
  });
  await expect(t.runtime.templateFromImage('img-scratch', `${registry.host}/paddock-test/scratch:scratch`)).rejects.toMatchObject({ kind: 'conflict' });
  expect(await t.runtime.getTemplate('img-missing')).toBeUndefined();
});

test("a runtime with its own image store removes the layers no template and no sandbox stands on; a snapshot's pinned layers stay", async () => {
  // Its own store (not the tests' shared one), with a base from the scratch image: nothing to unpack but busybox.
  const own = await testRuntime({ layersDir: undefined, baseImage: refs.scratch, warmPoolSize: 0 });
  const layers = () => readdirSync(join(own.dataDir, 'layers', 'sha256')).sort();
  try {
    const base = layers();
    expect(base).toHaveLength(1);
    await own.runtime.templateFromImage('musl', refs.musl);
    await own.runtime.templateFromImage('multi', refs.layers);
    expect(layers()).toHaveLength(4);
    await own.runtime.deleteTemplate('multi');
    expect(layers()).toHaveLength(2);

    // A snapshot of a sandbox of 'musl' pins musl's layer beneath it, though 'musl' is made again on another image.
    const { id } = await own.runtime.create({ templateId: 'musl', init: { accessToken: TOKEN } });
    await exec(own.runtime, id, 'echo kept > /tmp/kept');
    await own.runtime.snapshot(id, 'musl-snap');
    await own.runtime.destroy(id);
    const muslLayer = layers().find((l) => !base.includes(l))!;
    await own.runtime.templateFromImage('musl', refs.scratch, { replace: true });
    expect(layers()).toEqual([...base, muslLayer].sort());
    const child = await own.runtime.create({ templateId: 'musl-snap', init: { accessToken: TOKEN } });
    expect((await exec(own.runtime, child.id, 'cat /tmp/kept; hello')).stdout).toBe('kept\nhello from musl\n');
    await own.runtime.destroy(child.id);
    await own.runtime.deleteTemplate('musl-snap');
    expect(layers()).toEqual(base);
    expect(existsSync(join(own.dataDir, 'layers', 'sha256', muslLayer))).toBe(false);
  } finally {
    await own.teardown();
  }
  // The tests' shared store is never collected: every image of this file is still there.
  for (const tag of TEST_IMAGES) expect(await t.runtime.getTemplate(`img-${tag}`)).toBeDefined();
});
