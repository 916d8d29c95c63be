// Templates from registry images, as a user of the official e2b SDK makes
// them: `Template.build(Template().fromImage(ref), name)` against a local
// registry (Debian's docker-registry) holding images made here (a scratch
// image with one static busybox, an Alpine-like musl image, a multi-layer
// image, a Debian root filesystem). In a sandbox of each: commands, files,
// a PTY, a directory watch and metrics.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuildError, Sandbox, Template, type FilesystemEvent } from 'e2b';
import { startRegistry, type TestRegistry } from '../../runtime/test/registry.js';
import { pushDebianImage, pushTestImages } from '../../runtime/test/test-images.js';
import { eventually, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
let registry: TestRegistry;
let workDir: string;
const refs: Record<string, string> = {};

beforeAll(async () => {
  registry = await startRegistry();
  workDir = mkdtempSync(join(tmpdir(), 'paddock-compat-images-'));
  Object.assign(refs, await pushTestImages(registry, workDir));
  refs.debian = await pushDebianImage(registry, workDir, process.env.PADDOCK_CACHE_DIR!);
  c = await startForE2b();
}, 600_000);

afterAll(async () => {
  await c?.teardown();
  await registry?.stop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** What each image's sandbox says of itself: its user (the image's, else `user`, else root) and where it starts. */
const expected: Record<string, { uid: string; pwd: string }> = {
  scratch: { uid: '0', pwd: '/root' },
  musl: { uid: '1000', pwd: '/home/user' },
  layers: { uid: '0', pwd: '/root' },
  debian: { uid: '1000', pwd: '/home/user' },
};

describe.each(['scratch', 'musl', 'layers', 'debian'])('a template built from the %s image', (name) => {
  let sbx: Sandbox;

  beforeAll(async () => {
    const logs: string[] = [];
    await Template.build(Template().fromImage(refs[name]!), `image-${name}`, { onBuildLogs: (l) => logs.push(l.message) });
    expect(logs.join('\n')).toContain(`FROM ${refs[name]}`);
    sbx = await Sandbox.create(`image-${name}`);
  }, 300_000);
  afterAll(() => sbx?.kill());

  test('runs commands as the image says', async () => {
    const r = await sbx.commands.run('echo hello-$((1+1)); id -u; pwd');
    expect(r.stdout).toBe(`hello-2\n${expected[name]!.uid}\n${expected[name]!.pwd}\n`);
  });

  test('writes and reads files', async () => {
    await sbx.files.write('/tmp/paddock.txt', `written in ${name}`);
    expect(await sbx.files.read('/tmp/paddock.txt')).toBe(`written in ${name}`);
    expect((await sbx.files.list('/tmp')).map((e) => e.name)).toContain('paddock.txt');
  });

  test('opens a terminal', async () => {
    let out = '';
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += new TextDecoder().decode(d)) });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo pty-$((2+3))\n'));
    await eventually(() => out.includes('pty-5'), `'pty-5' on the terminal (it showed: ${JSON.stringify(out)})`, 20_000);
    await pty.kill();
  });

  test('watches a directory', async () => {
    const events: FilesystemEvent[] = [];
    const watch = await sbx.files.watchDir('/tmp', (e) => void events.push(e));
    await sbx.files.write('/tmp/watched.txt', 'x');
    await eventually(() => events.some((e) => e.name === 'watched.txt'), 'an event of watched.txt', 20_000);
    await watch.stop();
  });

  test('reports metrics', async () => {
    await eventually(async () => (await sbx.getMetrics()).length > 0, 'a metrics sample', 30_000);
  });
});

test('the layers image shows its whiteout and its opaque directory', async () => {
  const sbx = await Sandbox.create('image-layers');
  expect((await sbx.commands.run('ls /data; echo --; ls /data/old')).stdout).toBe('kept\nold\n--\nafter\n');
  await sbx.kill();
});

test('in the Debian image, user has sudo, apt and pip work, and the host is not visible', async () => {
  const sbx = await Sandbox.create('image-debian');
  const r = await sbx.commands.run('sudo -n id -u && apt-get --version | head -1 && pip --version | cut -d" " -f1 && cat /proc/self/uid_map');
  const [rootUid, apt, pip, uidMap] = r.stdout.split('\n');
  expect([rootUid, apt, pip]).toEqual(['0', expect.stringMatching(/^apt /), 'pip']);
  // Root inside is not root outside: uid 0 maps to a host id far above.
  expect(uidMap!.trim().split(/\s+/)).toEqual(['0', expect.not.stringMatching(/^0$/), '65536']);
  await sbx.kill();
});

test('an image that cannot be pulled fails its build with the reason', async () => {
  const missing = `${registry.host}/paddock-test/nothing:here`;
  await expect(Template.build(Template().fromImage(missing), 'image-missing')).rejects.toThrow(BuildError);
  await expect(Template.build(Template().fromImage(missing), 'image-missing')).rejects.toMatchObject({
    message: expect.stringContaining(`image '${missing}' could not be pulled`),
  });
});
