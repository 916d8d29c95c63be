// `paddock template import` and `paddock template rebuild`: the real
// command against a real server whose base template is an image of a local
// registry (so that making it again is a pull, not a Debian build).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create as createTar } from 'tar';
import { OciLayout, startRegistry, tarOf, type TestRegistry } from '../../runtime/test/registry.js';
import { busyboxEntries, pushTestImages } from '../../runtime/test/test-images.js';
import { run, testServer, type TestServer } from '../../server/test/harness.js';
import { runPaddock } from './run-cli.js';

let t: TestServer;
let registry: TestRegistry;
let work: string;

beforeAll(async () => {
  registry = await startRegistry();
  work = mkdtempSync(join(tmpdir(), 'paddock-cli-import-'));
  const refs = await pushTestImages(registry, work);
  t = await testServer({ baseImage: refs.musl });
}, 300_000);

afterAll(async () => {
  await t?.teardown();
  await registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const paddock = (args: string[]) => runPaddock(args, { home: work, apiUrl: t.server.apiUrl });

test('template import makes a template of an OCI layout tar, with the progress of its layers; a second import uploads nothing', async () => {
  const layout = new OciLayout(join(work, 'import-layout'));
  layout.image([tarOf([...busyboxEntries('root:x:0:0:root:/root:/bin/sh\n'), { path: 'etc/imported', body: 'imported\n' }])], { tag: 'v1', config: { Env: ['PATH=/bin'] } });
  const archive = join(work, 'app.tar');
  await createTar({ file: archive, cwd: layout.dir }, ['oci-layout', 'index.json', 'blobs']);

  const first = await paddock(['template', 'import', archive, '--name', 'cli-imported:v1']);
  expect([first.code, first.stderr]).toEqual([0, '']);
  expect(first.stdout).toMatch(/^importing .*app\.tar \([\d.]+ [KM]iB\) as template cli-imported \(\w+\), build [\w-]+\nuploaded\n/);
  // Unpacked now, or found unpacked in the image store the tests share.
  expect(first.stdout).toMatch(/\[base\] .*layer [0-9a-f]{12} (done|is here already)/);
  expect(first.stdout).toMatch(/imported template cli-imported \(\w+\), build [\w-]+\n$/);
  const s = await t.control.createSandbox({ templateID: 'cli-imported:v1' });
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat /etc/imported')).stdout).toBe('imported\n');
  await t.control.killSandbox(s.sandboxID);

  const again = await paddock(['template', 'import', archive, '--name', 'cli-imported', '--json']);
  expect(again.code).toBe(0);
  expect(again.stderr).toContain('the archive is on the server already');
  expect(JSON.parse(again.stdout)).toMatchObject({ status: 'ready', names: ['cli-imported'] });

  const missing = await paddock(['template', 'import', join(work, 'nothing.tar'), '--name', 'x']);
  expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining("the image archive '")]);

  // The layout of the registry's images holds several: which one was meant is not guessed.
  const several = join(work, 'several.tar');
  await createTar({ file: several, cwd: join(work, 'layout') }, ['oci-layout', 'index.json', 'blobs']);
  const refused = await paddock(['template', 'import', several, '--name', 'cli-several']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/failed at step base: image '[0-9a-f]{64}' could not be imported: .*holds 3 images \(scratch, musl, layers\); an archive of one image is imported/);
});

test('template rebuild base pulls its image again as a build, showing its log', async () => {
  const rebuilt = await paddock(['template', 'rebuild', 'base']);
  expect([rebuilt.code, rebuilt.stderr]).toEqual([0, '']);
  expect(rebuilt.stdout).toMatch(/^making template base again, build [\w-]+\n\[base\] Making the base template again\n/);
  expect(rebuilt.stdout).toContain('paddock-test/musl');
  expect(rebuilt.stdout).toMatch(/made again: template base, build [\w-]+\n$/);
  const other = await paddock(['template', 'rebuild', 'cli-imported']);
  expect([other.code, other.stderr]).toEqual([1, expect.stringContaining("template 'cli-imported' is not the base template")]);
});
