// Template builds through the control API, as the SDKs drive it: a build is
// requested (POST /v3/templates), the files of its COPY steps uploaded to
// signed URLs, its steps started (POST /v2/templates/{id}/builds/{buildID})
// and its status polled; sandboxes of the built template show the steps.
import { gzipSync } from 'node:zlib';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { tarOf } from '../../runtime/test/registry.js';
import { api as callApi, finishedBuild, run, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await testServer();
});
afterAll(() => t.teardown());

const api = (method: string, path: string, body?: unknown) => callApi(t.server, method, path, body);
const finished = (templateId: string, buildId: string) => finishedBuild(t.server, templateId, buildId);

/** Uploads `archive` for the files `hash` of a template the way the SDKs do: ask, then PUT to the URL given. */
async function upload(templateId: string, hash: string, archive: Buffer): Promise<void> {
  const link = await api('GET', `/templates/${templateId}/files/${hash}`);
  expect(link).toEqual({ status: 201, body: { present: false, url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/templates\/.+\/upload\?expires=\d+&signature=/) } });
  const put = await fetch(link.body.url, { method: 'PUT', body: archive, headers: { 'content-length': String(archive.length) } });
  expect(put.status).toBe(201);
  expect(await api('GET', `/templates/${templateId}/files/${hash}`)).toEqual({ status: 201, body: { present: true } });
}

const hashOf = (s: string) => createHash('sha256').update(s).digest('hex');

const app = gzipSync(
  tarOf([
    { path: 'app', type: 'Directory' },
    { path: 'app/main.txt', body: 'main\n' },
    { path: 'app/sub', type: 'Directory' },
    { path: 'app/sub/deep.txt', body: 'deep\n' },
    { path: 'app/link', type: 'SymbolicLink', linkpath: 'main.txt' },
  ]),
);
const APP_HASH = hashOf('app files');

const steps = [
  { type: 'ENV', args: ['GREETING', 'hello', 'OTHER', 'x'] },
  { type: 'RUN', args: ['echo "$GREETING from $(whoami)" > /tmp/run.txt'] },
  { type: 'RUN', args: ['echo root-made > /opt/r.txt', 'root'] },
  { type: 'COPY', args: ['app/', '/opt/app', 'user', '0755'], filesHash: APP_HASH },
  { type: 'WORKDIR', args: ['/home/user/work'] },
  { type: 'USER', args: ['builder'] },
  { type: 'RUN', args: ['whoami > /tmp/who.txt; pwd >> /tmp/who.txt'] },
];

test('a build from the base template runs its steps, and sandboxes of it show them; a rebuild runs none', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-built:v1', cpuCount: 1, memoryMB: 512 });
  expect(req).toEqual({ status: 202, body: { templateID: expect.any(String), buildID: expect.any(String), public: false, names: ['srv-built'], aliases: ['srv-built'], tags: ['v1'] } });
  const { templateID, buildID } = req.body;
  await upload(templateID, APP_HASH, app);
  expect(await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps, startCmd: 'echo started > /tmp/started; sleep 3600', readyCmd: 'test -f /tmp/started' })).toEqual({
    status: 202,
    body: undefined,
  });
  const done = await finished(templateID, buildID);
  expect(done).toMatchObject({ status: 'ready' });
  const messages = done.logEntries.map((e) => e.message);
  expect(messages).toEqual(expect.arrayContaining(['FROM template base', '[1/7] ENV GREETING=hello OTHER=x', '[7/7] RUN whoami > /tmp/who.txt; pwd >> /tmp/who.txt']));
  expect(messages.filter((m) => m.startsWith('CACHED'))).toEqual([]);

  const s = await t.control.createSandbox({ templateID: 'srv-built:v1' });
  const r = await run(
    t.server,
    s.sandboxID,
    s.envdAccessToken,
    'cat /tmp/run.txt /opt/r.txt; stat -c "%U %a" /opt/r.txt /opt/app /opt/app/main.txt; cat /opt/app/sub/deep.txt; readlink /opt/app/link; cat /tmp/who.txt; whoami; pwd; echo $GREETING; cat /tmp/started',
  );
  expect(r.stdout).toBe('hello from user\nroot-made\nroot 644\nuser 755\nuser 755\ndeep\nmain.txt\nbuilder\n/home/user/work\nbuilder\n/home/user/work\nhello\nstarted\n');

  // The same steps again: every layer is found, nothing runs.
  const again = await api('POST', '/v3/templates', { name: 'srv-built' });
  expect(again.body.templateID).toBe(templateID);
  expect(again.body.tags).toEqual(['default']);
  expect(await api('GET', `/templates/${templateID}/files/${APP_HASH}`)).toEqual({ status: 201, body: { present: true } });
  await api('POST', `/v2/templates/${templateID}/builds/${again.body.buildID}`, { fromTemplate: 'base', steps, startCmd: 'echo started > /tmp/started; sleep 3600', readyCmd: 'test -f /tmp/started' });
  const cached = await finished(templateID, again.body.buildID);
  expect(cached.status).toBe('ready');
  const layerSteps = steps.filter((x) => x.type !== 'ENV').length;
  expect(cached.logEntries.filter((e) => e.message.startsWith('CACHED')).length).toBe(layerSteps);
  expect(cached.logEntries.map((e) => e.message)).not.toContain('[2/7] RUN echo "$GREETING from $(whoami)" > /tmp/run.txt');

  // force on a step rebuilds from it on.
  const forced = await api('POST', '/v3/templates', { name: 'srv-built' });
  await api('POST', `/v2/templates/${templateID}/builds/${forced.body.buildID}`, { fromTemplate: 'base', steps: steps.map((x, i) => (i === 5 ? { ...x, force: true } : x)) });
  const rebuilt = await finished(templateID, forced.body.buildID);
  expect(rebuilt.logEntries.filter((e) => e.message.startsWith('CACHED')).map((e) => e.step)).toEqual(['2', '3', '4', '5']);

  await t.control.killSandbox(s.sandboxID);
  const listed = await t.control.getTemplate(templateID, {});
  expect(listed.template.builds.map((b) => b.status)).toEqual(['ready', 'ready', 'ready']);
});

test('a failing step ends the build in error with its step, its reason and its output', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-failing' });
  await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['echo about-to-fail; exit 3'] }] });
  const done = await finished(req.body.templateID, req.body.buildID);
  expect(done.status).toBe('error');
  expect(done.reason).toMatchObject({ step: '1', message: "the command 'echo about-to-fail; exit 3' failed: exit status 3" });
  expect(done.reason!.logEntries.map((e) => e.message)).toContain('about-to-fail');
  // A template with no ready build starts no sandbox.
  await expect(t.control.createSandbox({ templateID: 'srv-failing' })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('has no ready build') });
});

/** The sandbox ids that hold network slots of the server's runtime now, from its slot records. */
const slotHolders = () => {
  const dir = join(t.home, 'runtime/network/slots');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { sandboxId: string }).sandboxId);
};

test("a build's RUN steps share one network slot, which the build releases at its end, failed or not", async () => {
  const before = slotHolders();
  for (const [name, last] of [['srv-one-net', 'true'], ['srv-one-net-failing', 'exit 4']] as const) {
    const req = await api('POST', '/v3/templates', { name });
    // Each build's own commands: none is cached from the other's.
    const netns = `: ${name}; echo "ns $(readlink /proc/self/ns/net)"`;
    await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, {
      fromTemplate: 'base',
      steps: [
        { type: 'RUN', args: [netns, 'root'] },
        { type: 'RUN', args: [`${netns}; echo two > /opt/two`, 'root'] },
        { type: 'RUN', args: [`${netns}; ${last}`, 'root'] },
      ],
    });
    const done = await finished(req.body.templateID, req.body.buildID);
    expect(done.status).toBe(last === 'true' ? 'ready' : 'error');
    const seen = done.logEntries.map((e) => e.message).filter((m) => m.startsWith('ns net:['));
    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(1);
    // Released in the background, as the step containers are removed (and
    // those of earlier tests may be going meanwhile): no holder is new.
    const added = () => slotHolders().filter((id) => !before.includes(id));
    for (let i = 0; i < 100 && added().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(added()).toEqual([]);
  }
});

test('a COPY that cannot be placed fails the build naming why, and leaves no layer, whole or half-made', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-badcopy' });
  const { templateID, buildID } = req.body;
  const hash = hashOf('bad copy');
  await upload(templateID, hash, app);
  const before = readdirSync(join(t.home, 'runtime/templates')).sort();
  await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'COPY', args: ['app/', '/opt/app', 'carol'], filesHash: hash }] });
  const done = await finished(templateID, buildID);
  expect(done.status).toBe('error');
  expect(done.reason).toMatchObject({ step: '1', message: "copying 'app/' to '/opt/app' failed: user 'carol' is not in /etc/passwd" });
  expect(readdirSync(join(t.home, 'runtime/templates')).sort()).toEqual(before);
});

test("a running build's status is answered at the build's end, or after 1 s with the entries written by then", async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-held' });
  const { templateID, buildID } = req.body;
  // A command of its own: a step another test runs would be cached.
  await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['sleep 2.5; echo held'] }] });
  const status = (offset: number) => api('GET', `/templates/${templateID}/builds/${buildID}/status?logsOffset=${offset}`);
  // Past every entry there is: nothing new, held.
  const started = performance.now();
  expect((await status(10_000)).body).toMatchObject({ status: 'building', logEntries: [] });
  expect(performance.now() - started).toBeGreaterThanOrEqual(950);
  // From the start: held too, then the entries so far.
  const fresh = performance.now();
  expect((await status(0)).body).toMatchObject({ status: 'building', logEntries: expect.arrayContaining([expect.objectContaining({ message: '[1/1] RUN sleep 2.5; echo held' })]) });
  expect(performance.now() - fresh).toBeGreaterThanOrEqual(950);
  // A poll that reads on from what it got, asked again at once after each
  // answer: held answers make a few polls of the build's seconds, and the
  // last one is its end, with the entries of the end.
  let offset = 0;
  let last = await status(offset);
  let polls = 1;
  for (; last.body.status === 'building' && polls < 100; polls++) {
    offset += last.body.logEntries.length;
    last = await status(offset);
  }
  expect(last.body.status).toBe('ready');
  expect(last.body.logEntries.map((e: { message: string }) => e.message)).toContain('held');
  expect(polls).toBeLessThan(6);
});

test("a poller that sleeps 0.2 s after each answer, as the SDKs do, learns of a build's end as it happens while its log flows, in a few requests", async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-live' });
  const { templateID, buildID } = req.body;
  await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['for i in $(seq 1 15); do echo line$i; sleep 0.1; done'] }] });
  // Lines come every 0.1 s (the log writes them in batches every 0.2 s):
  // answered at once when there were entries to give, each answer sent the
  // poller to sleep while more came, and the build mostly ended in a sleep.
  const lag = new Map<string, number>();
  let offset = 0;
  let requests = 0;
  let body: { status: string; logEntries: Array<{ timestamp: string; message: string }> };
  for (;;) {
    requests++;
    ({ body } = await api('GET', `/templates/${templateID}/builds/${buildID}/status?logsOffset=${offset}`));
    for (const e of body.logEntries) if (/^line\d+$/.test(e.message)) lag.set(e.message, Date.now() - Date.parse(e.timestamp));
    offset += body.logEntries.length;
    if (body.status !== 'building') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const learnt = Date.now();
  expect(body.status).toBe('ready');
  // Its end is its last entry's time, written with the end.
  const end = Date.parse(body.logEntries.at(-1)!.timestamp);
  expect(learnt - end).toBeLessThan(150);
  expect(requests).toBeLessThanOrEqual(4);
  // Every line came, none later than the hold and a batch after it was written.
  expect(lag.size).toBe(15);
  expect(Math.max(...lag.values())).toBeLessThan(1_500);
});

test('a run as a user that does not exist fails the build naming it', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-nouser' });
  await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true', 'nobody-here'] }] });
  const done = await finished(req.body.templateID, req.body.buildID);
  expect(done.status).toBe('error');
  expect(done.reason!.message).toMatch(/nobody-here/);
});

test('bad steps and uploads are refused with what is wrong, before anything runs', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-bad' });
  const start = (body: object) => api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, body);
  const refused = async (body: object, message: RegExp) => expect(await start(body)).toEqual({ status: 400, body: { code: 400, message: expect.stringMatching(message) } });
  await refused({ steps: [] }, /needs fromImage, fromTemplate or fromImageArchive/);
  await refused({ fromTemplate: 'base', fromImage: 'x' }, /not fromImage and fromTemplate/);
  await refused({ fromTemplate: 'base', steps: [{ type: 'FROB', args: [] }] }, /^step 1 \(FROB\): unknown step type/);
  await refused({ fromTemplate: 'base', steps: [{ type: 'RUN', args: ['  '] }] }, /^step 1 \(RUN\): the command is empty/);
  await refused({ fromTemplate: 'base', steps: [{ type: 'ENV', args: ['A'] }] }, /^step 1 \(ENV\): needs pairs/);
  await refused({ fromTemplate: 'base', steps: [{ type: 'COPY', args: ['a', '/a'], filesHash: 'f'.repeat(64) }] }, /^step 1 \(COPY\): the files of 'a' .* were never uploaded/);
  await refused({ fromTemplate: 'base', steps: [{ type: 'COPY', args: ['../a', '/a'], filesHash: APP_HASH }] }, /outside the build context/);
  await refused({ fromImage: 'x', fromImageRegistry: { type: 'aws' } }, /fromImageRegistry/);

  // Not an archive: refused, and not kept.
  const hash = hashOf('not a tar');
  const link = await api('GET', `/templates/${req.body.templateID}/files/${hash}`);
  const put = await fetch(link.body.url, { method: 'PUT', body: 'this is not a tar archive at all'.repeat(40) });
  expect(put.status).toBe(400);
  expect(await put.json()).toEqual({ code: 400, message: expect.stringMatching(/^the upload is not a tar archive/) });
  expect((await api('GET', `/templates/${req.body.templateID}/files/${hash}`)).body.present).toBe(false);
  // A URL signed for one hash does not take another's files.
  const other = link.body.url.replace(hash, hashOf('other'));
  expect((await fetch(other, { method: 'PUT', body: app })).status).toBe(403);

  // The build is still waiting and can be started once; a second start of it is refused.
  expect((await start({ fromTemplate: 'base', steps: [{ type: 'RUN', args: ['sleep 2'] }] })).status).toBe(202);
  expect(await start({ fromTemplate: 'base' })).toMatchObject({ status: 409, body: { message: expect.stringMatching(/is building/) } });
  // Another build of the template while one is under way is refused.
  expect(await api('POST', '/v3/templates', { name: 'srv-bad' })).toMatchObject({ status: 409, body: { message: expect.stringMatching(/has a build under way/) } });
  expect((await finished(req.body.templateID, req.body.buildID)).status).toBe('ready');
});

test('a built template in use by a sandbox cannot be deleted; once unused it goes, with its name', async () => {
  const req = await api('POST', '/v3/templates', { name: 'srv-deleted' });
  await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['echo x > /tmp/x'] }] });
  expect((await finished(req.body.templateID, req.body.buildID)).status).toBe('ready');
  const s = await t.control.createSandbox({ templateID: 'srv-deleted' });
  expect(await api('DELETE', `/templates/${req.body.templateID}`)).toEqual({
    status: 409,
    body: { code: 409, message: `template '${req.body.templateID}' is used by sandbox ${s.sandboxID} (kill it first)` },
  });
  await t.control.killSandbox(s.sandboxID);
  expect((await api('DELETE', '/templates/srv-deleted')).status).toBe(204);
  await expect(t.control.createSandbox({ templateID: 'srv-deleted' })).rejects.toMatchObject({ status: 404 });
  // The name is free for a new template.
  expect((await api('POST', '/v3/templates', { name: 'srv-deleted' })).body.templateID).not.toBe(req.body.templateID);
});

test("a sandbox rebooted (a resume without memory) runs its own build's start command again, not a newer build's", async () => {
  const build = async (word: string) => {
    const req = await api('POST', '/v3/templates', { name: 'srv-reboot' });
    await api('POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, {
      fromTemplate: 'base',
      startCmd: `echo ${word} >> /tmp/which; sleep 3600`,
      readyCmd: 'test -f /tmp/which',
    });
    expect((await finished(req.body.templateID, req.body.buildID)).status).toBe('ready');
  };
  await build('one');
  const s = await t.control.createSandbox({ templateID: 'srv-reboot' });
  await build('two');
  await t.control.pauseSandbox(s.sandboxID, { memory: false });
  await t.control.connectSandbox(s.sandboxID, { timeout: 60 });
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat /tmp/which')).stdout).toBe('one\none\n');
  await t.control.killSandbox(s.sandboxID);
});
