// Templates, snapshots, forks and tags through the control API.
import { run, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await testServer();
});
afterAll(() => t.teardown());

test('the base template exists from the first start, with one ready build', async () => {
  const list = await t.control.listTemplates({});
  expect(list.map((x) => x.templateID)).toEqual(['base']);
  expect(list[0]).toMatchObject({ names: ['base'], aliases: ['base'], public: true, buildStatus: 'ready', envdVersion: '0.7.0', cpuCount: 2, memoryMB: 512 });
  const { template } = await t.control.getTemplate('base', {});
  expect(template.builds).toHaveLength(1);
  expect(template.builds[0]).toMatchObject({ status: 'ready', cpuCount: 2, memoryMB: 512 });
  expect(await t.control.getTemplateByAlias('base')).toEqual({ templateID: 'base', public: true });
});

test('a snapshot is a template: new sandboxes from it have the files; it is listed and deletable once unused', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'mkdir -p ~/app && echo v1 > ~/app/version');
  const snap = await t.control.createSnapshot(s.sandboxID, { name: 'my-app' });
  expect(snap.names).toEqual(['my-app']);
  await expect(t.control.createSnapshot(s.sandboxID, { name: 'my-app' })).rejects.toMatchObject({ status: 409 });
  const listed = await t.control.listSnapshots({ sandboxID: s.sandboxID });
  expect(listed.items).toEqual([{ snapshotID: snap.snapshotID, names: ['my-app'] }]);
  expect((await t.control.listSnapshots({ name: 'my-app' })).items).toHaveLength(1);
  expect((await t.control.listSnapshots({ name: 'other' })).items).toEqual([]);
  // Pages of one, oldest first, each snapshot once.
  const second = await t.control.createSnapshot(s.sandboxID, {});
  const pages: string[][] = [];
  for await (const page of t.control.paginateSnapshots({ sandboxID: s.sandboxID, limit: 1 }).pages()) pages.push(page.items.map((x) => x.snapshotID));
  expect(pages).toEqual([[snap.snapshotID], [second.snapshotID]]);
  await t.control.deleteTemplate(second.snapshotID);
  const child = await t.control.createSandbox({ templateID: 'my-app' });
  expect(child.templateID).toBe(snap.snapshotID);
  expect((await run(t.server, child.sandboxID, child.envdAccessToken, 'cat ~/app/version')).stdout).toBe('v1\n');
  expect((await t.control.getTemplate('my-app', {})).template.spawnCount).toBe(1);
  await expect(t.control.deleteTemplate(snap.snapshotID)).rejects.toMatchObject({ status: 409 });
  await t.control.killSandbox(child.sandboxID);
  await t.control.deleteTemplate(snap.snapshotID);
  await expect(t.control.getTemplate(snap.snapshotID, {})).rejects.toMatchObject({ status: 404 });
  await t.control.killSandbox(s.sandboxID);
});

test('fork copies the filesystem into new sandboxes, not the processes', async () => {
  const s = await t.control.createSandbox({ templateID: 'base', metadata: { role: 'parent' } });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo forked > ~/state; (sleep 1000 &)');
  const results = await t.control.forkSandbox(s.sandboxID, { count: 2, timeout: 120 });
  expect(results).toHaveLength(2);
  for (const r of results) {
    expect(r.error).toBeUndefined();
    const f = r.sandbox!;
    expect(f.sandboxID).not.toBe(s.sandboxID);
    expect((await t.control.getSandbox(f.sandboxID)).metadata).toEqual({ role: 'parent' });
    expect((await run(t.server, f.sandboxID, f.envdAccessToken, 'cat ~/state; pgrep -x sleep | wc -l')).stdout).toBe('forked\n0\n');
    await t.control.killSandbox(f.sandboxID);
  }
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'pgrep -x sleep | wc -l')).stdout).toBe('1\n');
  await t.control.killSandbox(s.sandboxID);
});

test('tags: assign, list, move by name:tag, delete', async () => {
  const build = (await t.control.getTemplate('base', {})).template.builds[0]!.buildID;
  expect(await t.control.assignTemplateTags({ target: 'base', tags: ['stable', 'v1'] })).toEqual({ tags: ['stable', 'v1'], buildID: build });
  expect((await t.control.listTemplateTags('base')).map((x) => [x.tag, x.buildID])).toEqual([
    ['stable', build],
    ['v1', build],
  ]);
  expect(await t.control.assignTemplateTags({ target: 'base:v1', tags: ['latest'] })).toEqual({ tags: ['latest'], buildID: build });
  const s = await t.control.createSandbox({ templateID: 'base:stable' });
  expect(s.templateID).toBe('base');
  await t.control.killSandbox(s.sandboxID);
  await t.control.deleteTemplateTags({ name: 'base', tags: ['stable', 'latest'] });
  expect((await t.control.listTemplateTags('base')).map((x) => x.tag)).toEqual(['v1']);
  await expect(t.control.deleteTemplateTags({ name: 'base', tags: ['stable'] })).rejects.toMatchObject({ status: 404 });
  await expect(t.control.createSandbox({ templateID: 'base:stable' })).rejects.toMatchObject({ status: 404 });
});

