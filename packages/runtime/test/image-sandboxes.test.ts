// Sandboxes from images in a registry: images this test builds (a scratch
// image with one static busybox, an Alpine-like musl image, a multi-layer
// image with a whiteout and an opaque directory) are pushed to a local
// registry (Debian's docker-registry), made templates with
// templateFromImage, and run: the runtime conformance suite runs in each of
// the first two, and files, environment and layers are checked in each.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeConformance } from './conformance.js';
import { exec, testRuntime, TOKEN, type TestRuntime } from './harness.js';
import { OciLayout, startRegistry, tarOf, type TarEntry, type TestRegistry } from './registry.js';

const BUSYBOX_APPLETS = ['sh', 'ls', 'cat', 'echo', 'id', 'mkdir', 'sleep', 'kill', 'nc', 'stat', 'readlink', 'env', 'head', 'true', 'ps', 'grep', 'df', 'tail', 'rm', 'pwd', 'hostname'];

/** The files every image here has: a root with /root, /tmp and accounts, busybox and its applets. */
function busyboxEntries(passwd: string): TarEntry[] {
  return [
    ...['bin', 'etc', 'root', 'home', 'proc', 'sys', 'dev', 'lib', 'usr', 'usr/bin'].map((path) => ({ path, type: 'Directory' as const })),
    { path: 'tmp', type: 'Directory', mode: 0o1777 },
    { path: 'bin/busybox', body: readFileSync('/bin/busybox'), mode: 0o755 },
    ...BUSYBOX_APPLETS.map((a) => ({ path: `bin/${a}`, type: 'SymbolicLink' as const, linkpath: 'busybox' })),
    { path: 'etc/passwd', body: passwd },
    { path: 'etc/group', body: 'root:x:0:\nuser:x:1000:\n' },
  ];
}

let registry: TestRegistry;
let layoutDir: string;
let t: TestRuntime;

beforeAll(async () => {
  registry = await startRegistry();
  layoutDir = mkdtempSync(join(tmpdir(), 'paddock-image-sandboxes-'));
  const layout = new OciLayout(join(layoutDir, 'layout'));

  // Scratch: busybox and nothing else; no /bin/bash, no user `user`.
  layout.image([tarOf(busyboxEntries('root:x:0:0:root:/root:/bin/sh\n'))], { tag: 'scratch', config: { Env: ['PATH=/bin', 'IMAGE=scratch'], WorkingDir: '/root' } });

  // musl: musl's loader and a program built with musl-gcc, beside busybox; a user 1000.
  const src = join(layoutDir, 'hello.c');
  writeFileSync(src, '#include <stdio.h>\nint main(void) { puts("hello from musl"); return 0; }\n');
  execFileSync('musl-gcc', ['-o', join(layoutDir, 'hello'), src]);
  const loader = execFileSync('readlink', ['-f', '/lib/ld-musl-x86_64.so.1'], { encoding: 'utf8' }).trim();
  layout.image(
    [
      tarOf([
        ...busyboxEntries('root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n'),
        { path: 'home/user', type: 'Directory', uid: 1000, gid: 1000 },
        { path: 'lib/ld-musl-x86_64.so.1', body: readFileSync(loader), mode: 0o755 },
        { path: 'usr/bin/hello', body: readFileSync(join(layoutDir, 'hello')), mode: 0o755 },
      ]),
    ],
    { tag: 'musl', config: { Env: ['PATH=/usr/bin:/bin', 'IMAGE=musl'], User: 'user', WorkingDir: '/home/user' } },
  );

  // Layers: the second deletes /data/gone (a whiteout) and replaces /data/old's contents (an opaque directory).
  layout.image(
    [
      tarOf([
        ...busyboxEntries('root:x:0:0:root:/root:/bin/sh\n'),
        { path: 'data', type: 'Directory' },
        { path: 'data/gone', body: 'gone\n' },
        { path: 'data/kept', body: 'kept\n' },
        { path: 'data/old', type: 'Directory' },
        { path: 'data/old/before', body: 'before\n' },
      ]),
      tarOf([
        { path: 'data', type: 'Directory' },
        { path: 'data/.wh.gone', body: '' },
        { path: 'data/old', type: 'Directory' },
        { path: 'data/old/.wh..wh..opq', body: '' },
        { path: 'data/old/after', body: 'after\n' },
      ]),
    ],
    { tag: 'layers', config: { Env: ['PATH=/bin'] } },
  );
  for (const tag of ['scratch', 'musl', 'layers']) await registry.push(layout.dir, tag, `paddock-test/${tag}`);

  t = await testRuntime({ warmPoolSize: 0 });
  for (const tag of ['scratch', 'musl', 'layers']) await t.runtime.templateFromImage(`img-${tag}`, `${registry.host}/paddock-test/${tag}:${tag}`);
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
