// The images the image tests run: made here from what Debian packages
// provide, pushed to a test registry. A scratch image with one static
// busybox, an Alpine-like musl image, a multi-layer image with a whiteout
// and an opaque directory, and a Debian root filesystem (the base
// template's, built with mmdebstrap and cached for the test run).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE_IMAGE_CONFIG, buildBaseRootfs } from '../src/index.js';
import { OciLayout, tarOf, type TarEntry, type TestRegistry } from './registry.js';

export const BUSYBOX_APPLETS = ['sh', 'ls', 'cat', 'echo', 'id', 'mkdir', 'sleep', 'kill', 'nc', 'stat', 'readlink', 'env', 'head', 'true', 'ps', 'grep', 'df', 'tail', 'rm', 'pwd', 'hostname', 'touch'];

/** The files every busybox image here has: a root with /root, /tmp and accounts, busybox and its applets. */
export function busyboxEntries(passwd: string): TarEntry[] {
  return [
    ...['bin', 'etc', 'root', 'home', 'proc', 'sys', 'dev', 'lib', 'usr', 'usr/bin'].map((path) => ({ path, type: 'Directory' as const })),
    { path: 'tmp', type: 'Directory', mode: 0o1777 },
    { path: 'bin/busybox', body: readFileSync('/bin/busybox'), mode: 0o755 },
    ...BUSYBOX_APPLETS.map((a) => ({ path: `bin/${a}`, type: 'SymbolicLink' as const, linkpath: 'busybox' })),
    { path: 'etc/passwd', body: passwd },
    { path: 'etc/group', body: 'root:x:0:\nuser:x:1000:\n' },
  ];
}

export type TestImage = 'scratch' | 'musl' | 'layers';
export const TEST_IMAGES: TestImage[] = ['scratch', 'musl', 'layers'];

/** Makes the busybox images in an OCI layout under `workDir` and pushes each to `paddock-test/<name>:<name>`; their references. */
export async function pushTestImages(registry: TestRegistry, workDir: string): Promise<Record<TestImage, string>> {
  const layout = new OciLayout(join(workDir, 'layout'));

  // Scratch: busybox and nothing else; no /bin/bash, no user `user`.
  layout.image([tarOf(busyboxEntries('root:x:0:0:root:/root:/bin/sh\n'))], { tag: 'scratch', config: { Env: ['PATH=/bin', 'IMAGE=scratch'], WorkingDir: '/root' } });

  // musl: musl's loader and a program built with musl-gcc, beside busybox; a user 1000.
  const src = join(workDir, 'hello.c');
  writeFileSync(src, '#include <stdio.h>\nint main(void) { puts("hello from musl"); return 0; }\n');
  execFileSync('musl-gcc', ['-o', join(workDir, 'hello'), src]);
  const loader = execFileSync('readlink', ['-f', '/lib/ld-musl-x86_64.so.1'], { encoding: 'utf8' }).trim();
  layout.image(
    [
      tarOf([
        ...busyboxEntries('root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n'),
        { path: 'home/user', type: 'Directory', uid: 1000, gid: 1000 },
        { path: 'lib/ld-musl-x86_64.so.1', body: readFileSync(loader), mode: 0o755 },
        { path: 'usr/bin/hello', body: readFileSync(join(workDir, 'hello')), mode: 0o755 },
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
  for (const tag of TEST_IMAGES) await registry.push(layout.dir, tag, `paddock-test/${tag}`);
  return Object.fromEntries(TEST_IMAGES.map((tag) => [tag, `${registry.host}/paddock-test/${tag}:${tag}`])) as Record<TestImage, string>;
}

/**
 * Pushes the Debian root filesystem the base template is built from (cached
 * in the test run's cache) as a one-layer image, `paddock-test/debian:bookworm`;
 * its reference.
 */
export async function pushDebianImage(registry: TestRegistry, workDir: string, cacheDir: string): Promise<string> {
  const { tarPath } = await buildBaseRootfs({ cacheDir });
  const layout = new OciLayout(join(workDir, 'debian-layout'));
  const image = await layout.imageOfTarFile(tarPath, {
    tag: 'bookworm',
    config: { Env: BASE_IMAGE_CONFIG.env, User: BASE_IMAGE_CONFIG.user, WorkingDir: BASE_IMAGE_CONFIG.workingDir },
  });
  await registry.upload(layout.dir, 'paddock-test/debian', 'bookworm', image.manifest.digest);
  return `${registry.host}/paddock-test/debian:bookworm`;
}
