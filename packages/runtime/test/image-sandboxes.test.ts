// Sandboxes from images in a registry: images this test builds (a scratch
// image with one static busybox, an Alpine-like musl image, a multi-layer
// image with a whiteout and an opaque directory) are pushed to a local
// registry (Debian's docker-registry), made templates with
// templateFromImage, and run: the runtime conformance suite runs in each of
// the first two, and files, environment and layers are checked in each.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeConformance } from './conformance.js';
import { exec, testRuntime, TOKEN, type TestRuntime } from './harness.js';
import { startRegistry, type TestRegistry } from './registry.js';
import { pushTestImages, TEST_IMAGES } from './test-images.js';

let registry: TestRegistry;
let layoutDir: string;
let t: TestRuntime;

beforeAll(async () => {
  registry = await startRegistry();
  layoutDir = mkdtempSync(join(tmpdir(), 'paddock-image-sandboxes-'));
  const refs = await pushTestImages(registry, layoutDir);
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
