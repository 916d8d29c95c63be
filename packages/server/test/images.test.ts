// Templates from images the server does not build: an image archive
// uploaded by a client (`paddock template import`: a build from
// `fromImageArchive`), and the base template made again from its
// configured image (`paddock template rebuild base`), both followed as builds.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from 'tar';
import { OciLayout, startRegistry, tarOf, type TestRegistry } from '../../runtime/test/registry.js';
import { busyboxEntries, pushTestImages } from '../../runtime/test/test-images.js';
import { api as callApi, finishedBuild, run, testServer, type TestServer } from './harness.js';

let t: TestServer;
let registry: TestRegistry;
let work: string;

beforeAll(async () => {
  registry = await startRegistry();
  work = mkdtempSync(join(tmpdir(), 'paddock-srv-images-'));
  const refs = await pushTestImages(registry, work);
  // A server whose base template is an image of a registry, not Debian built here.
  t = await testServer({ baseImage: refs.musl });
}, 300_000);

afterAll(async () => {
  await t?.teardown();
  await registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown) => callApi(t.server, method, path, body);

/** A build followed to its end: its status and its log's messages. */
async function finished(templateId: string, buildId: string): Promise<{ status: string; messages: string[]; reason?: { message: string } }> {
  const done = await finishedBuild(t.server, templateId, buildId);
  return { status: done.status, messages: done.logEntries.map((e) => e.message), reason: done.reason };
}

test('an uploaded image archive (an OCI layout as a tar) becomes a template', async () => {
  const layout = new OciLayout(join(work, 'archive-layout'));
  layout.image([tarOf([...busyboxEntries('root:x:0:0:root:/root:/bin/sh\n'), { path: 'etc/archived', body: 'from the archive\n' }])], {
    tag: 'v1',
    config: { Env: ['PATH=/bin', 'FROM=archive'], WorkingDir: '/root' },
  });
  const archive = join(work, 'image.tar');
  await create({ file: archive, cwd: layout.dir }, ['oci-layout', 'index.json', 'blobs']);
  const bytes = readFileSync(archive);
  const hash = createHash('sha256').update(bytes).digest('hex');

  const req = await api('POST', '/v3/templates', { name: 'imported' });
  const link = await api('GET', `/templates/${req.body.templateID}/files/${hash}`);
  expect((await fetch(link.body.url, { method: 'PUT', body: bytes })).status).toBe(201);
  expect((await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, { fromImageArchive: hash, steps: [{ type: 'RUN', args: ['echo $FROM > /root/built'] }] })).status).toBe(202);
  const done = await finished(req.body.templateID, req.body.buildID);
  expect(done).toMatchObject({ status: 'ready' });
  expect(done.messages).toContain(`FROM the uploaded image archive ${hash}`);

  const s = await t.control.createSandbox({ templateID: 'imported' });
  const r = await run(t.server, s.sandboxID, s.envdAccessToken, 'cat /etc/archived /root/built; pwd');
  expect(r.stdout).toBe('from the archive\narchive\n/root\n');
  await t.control.killSandbox(s.sandboxID);

  // An archive that was never uploaded, or a hash that is none, is refused before anything runs.
  const next = await api('POST', '/v3/templates', { name: 'imported-2' });
  expect(await api('POST', `/v2/templates/${next.body.templateID}/builds/${next.body.buildID}`, { fromImageArchive: 'f'.repeat(64) })).toMatchObject({
    status: 400,
    body: { message: `the image archive ${'f'.repeat(64)} was never uploaded` },
  });
  expect(await api('POST', `/v2/templates/${next.body.templateID}/builds/${next.body.buildID}`, { fromImageArchive: hash, fromTemplate: 'base' })).toMatchObject({
    status: 400,
    body: { message: 'give one of fromImage, fromTemplate and fromImageArchive, not fromTemplate and fromImageArchive' },
  });
});

test('the base template is made again from its image as a build of it; sandboxes still start from it', async () => {
  const started = await api('POST', '/templates/base/rebuild');
  expect(started).toMatchObject({ status: 202, body: { templateID: 'base', buildID: expect.any(String) } });
  expect(await api('POST', '/templates/base/rebuild')).toMatchObject({ status: 409, body: { message: expect.stringMatching(/has a build under way/) } });
  const done = await finished('base', started.body.buildID);
  expect(done.status).toBe('ready');
  expect(done.messages[0]).toBe('Making the base template again');
  expect(done.messages.join('\n')).toContain('paddock-test/musl');
  const { template } = await t.control.getTemplate('base', {});
  expect(template.builds.map((b) => b.status)).toEqual(['ready', 'ready']);
  const s = await t.control.createSandbox({ templateID: 'base' });
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'hello')).stdout).toBe('hello from musl\n');
  await t.control.killSandbox(s.sandboxID);
  // Only the base template is made again this way.
  expect(await api('POST', '/templates/imported/rebuild')).toMatchObject({ status: 400, body: { message: expect.stringMatching(/is not the base template/) } });
});
