// Teams on a real server: a key sees and acts on its own team's sandboxes,
// templates, builds, snapshots and keys only — another team's answer 404
// exactly as ones that do not exist, on every route and through the proxy —
// public templates serve every team, the admin credential manages teams and
// keys (ordinary keys get 403), and a team's limits answer 429.
import { ControlClient } from '@paddock/control-client';
import { ADMIN_KEY, API_KEY, envd, testServer, type TestServer } from './harness.js';

let t: TestServer;
/** Team A is the default team, with the first key; team B is made here, with key B. */
let keyB: string;
let teamB: string;
let sa: { sandboxID: string; envdAccessToken?: string };
let sb: { sandboxID: string; envdAccessToken?: string };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the assertions say what a body holds
async function call(key: string | undefined, method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${t.server.apiUrl}${path}`, {
    method,
    headers: { ...(key ? { 'x-api-key': key } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const admin = () => new ControlClient({ apiUrl: t.server.apiUrl, apiKey: ADMIN_KEY, retries: { maxRetries: 0 } });

beforeAll(async () => {
  t = await testServer();
  const b = await admin().createTeam({ name: 'team-b' });
  teamB = b.teamID;
  keyB = (await admin().createTeamApiKey(teamB, { name: 'b' })).key;
  t.extraSecrets.push(keyB);
  sa = await t.control.createSandbox({ templateID: 'base', metadata: { who: 'a' } });
  sb = (await call(keyB, 'POST', '/sandboxes', { templateID: 'base', metadata: { who: 'b' } })).body;
}, 300_000);
afterAll(() => t?.teardown());

/** Whether team B's key gets, for A's `id`, exactly what it gets for an id that does not exist. */
async function asIfMissing(method: string, path: (id: string) => string, body?: unknown): Promise<void> {
  const missing = 'zzzzzzzzzzzzzzzzzzzz';
  const theirs = await call(keyB, method, path(sa.sandboxID), body);
  const none = await call(keyB, method, path(missing), body);
  expect([theirs.status, theirs.body]).toEqual([none.status, JSON.parse(JSON.stringify(none.body).replaceAll(missing, sa.sandboxID))]);
  expect(theirs.status).toBe(404);
}

test("another team's sandbox is not there for a key, on every route", async () => {
  await asIfMissing('GET', (id) => `/sandboxes/${id}`);
  await asIfMissing('GET', (id) => `/sandboxes/${id}/logs`);
  await asIfMissing('GET', (id) => `/v2/sandboxes/${id}/logs`);
  await asIfMissing('GET', (id) => `/sandboxes/${id}/metrics`);
  await asIfMissing('POST', (id) => `/sandboxes/${id}/timeout`, { timeout: 60 });
  await asIfMissing('POST', (id) => `/sandboxes/${id}/refreshes`, { duration: 60 });
  await asIfMissing('PUT', (id) => `/sandboxes/${id}/network`, { denyOut: ['0.0.0.0/0'] });
  await asIfMissing('POST', (id) => `/sandboxes/${id}/connect`, { timeout: 60 });
  await asIfMissing('POST', (id) => `/v2/sandboxes/${id}/connect`, {});
  await asIfMissing('POST', (id) => `/sandboxes/${id}/resume`, { timeout: 60 });
  await asIfMissing('POST', (id) => `/sandboxes/${id}/pause`);
  await asIfMissing('POST', (id) => `/sandboxes/${id}/snapshots`, {});
  await asIfMissing('POST', (id) => `/sandboxes/${id}/fork`, {});
  await asIfMissing('DELETE', (id) => `/sandboxes/${id}`);
  // Nothing happened to it, and it is still A's.
  expect(await t.control.getSandbox(sa.sandboxID)).toMatchObject({ sandboxID: sa.sandboxID, state: 'running' });

  // Lists: B's own only, whatever the filters and pages; the running count is B's.
  const listed = await call(keyB, 'GET', '/v2/sandboxes?limit=1');
  expect(listed.body.map((s: { sandboxID: string }) => s.sandboxID)).toEqual([sb.sandboxID]);
  expect(listed.headers.get('x-next-token')).toBeNull();
  expect(listed.headers.get('x-total-running')).toBe('1');
  expect((await call(keyB, 'GET', `/v2/sandboxes?metadata=${encodeURIComponent('who=a')}`)).body).toEqual([]);
  expect((await call(keyB, 'GET', '/v2/sandboxes?state=running,paused&template=base')).body.map((s: { sandboxID: string }) => s.sandboxID)).toEqual([sb.sandboxID]);
  expect((await call(keyB, 'GET', '/sandboxes')).body.map((s: { sandboxID: string }) => s.sandboxID)).toEqual([sb.sandboxID]);
  expect((await call(keyB, 'GET', `/sandboxes/metrics?sandbox_ids=${sa.sandboxID}`)).body).toEqual({ sandboxes: {} });
  // And A's key, likewise, does not see B's.
  expect((await t.control.listSandboxes()).items.map((s) => s.sandboxID)).toEqual([sa.sandboxID]);
  expect((await call(API_KEY, 'GET', `/sandboxes/${sb.sandboxID}`)).status).toBe(404);
});

test("another team's snapshots, templates and builds are not there for a key; public ones serve every team", async () => {
  const snap = (await call(API_KEY, 'POST', `/sandboxes/${sa.sandboxID}/snapshots`, { name: 'a-snap' })).body as { snapshotID: string };
  const build = (await call(API_KEY, 'POST', '/v3/templates', { name: 'a-built' })).body as { templateID: string; buildID: string };
  const missing = (status: number, body: unknown, what: string) => expect([status, body]).toEqual([404, { code: 404, message: what }]);
  for (const ref of [snap.snapshotID, 'a-snap']) {
    const got = await call(keyB, 'GET', `/templates/${ref}`);
    missing(got.status, got.body, `template '${ref}' not found`);
    const made = await call(keyB, 'POST', '/sandboxes', { templateID: ref });
    missing(made.status, made.body, `template '${ref}' not found`);
    const gone = await call(keyB, 'DELETE', `/templates/${ref}`);
    missing(gone.status, gone.body, `template '${ref}' not found`);
  }
  const alias = await call(keyB, 'GET', '/templates/aliases/a-snap');
  missing(alias.status, alias.body, "no template is named 'a-snap'");
  expect((await call(keyB, 'GET', '/snapshots')).body).toEqual([]);
  expect((await call(keyB, 'GET', `/snapshots?sandboxID=${sa.sandboxID}`)).body).toEqual([]);
  expect((await call(keyB, 'GET', '/templates')).body.map((x: { templateID: string }) => x.templateID)).toEqual(['base']);
  expect((await call(keyB, 'GET', `/templates/${snap.snapshotID}/tags`)).status).toBe(404);
  expect((await call(keyB, 'POST', '/templates/tags', { target: 'a-snap', tags: ['x'] })).status).toBe(404);

  const buildPaths = [`/templates/${build.templateID}/builds/${build.buildID}/status`, `/templates/${build.templateID}/builds/${build.buildID}/logs`];
  for (const path of buildPaths) {
    const got = await call(keyB, 'GET', path);
    missing(got.status, got.body, `template '${build.templateID}' not found`);
    expect((await call(API_KEY, 'GET', path)).status).toBe(200);
  }
  const start = await call(keyB, 'POST', `/v2/templates/${build.templateID}/builds/${build.buildID}`, { fromTemplate: 'base', steps: [] });
  missing(start.status, start.body, `template '${build.templateID}' not found`);
  expect((await call(keyB, 'GET', `/templates/${build.templateID}/files/${'a'.repeat(64)}`)).status).toBe(404);
  // The same name in B is B's own template, not another build of A's.
  const bBuild = (await call(keyB, 'POST', '/v3/templates', { name: 'a-built' })).body as { templateID: string; buildID: string };
  expect(bBuild.templateID).not.toBe(build.templateID);
  // A build of B's cannot start from A's private template.
  const fromA = await call(keyB, 'POST', `/v2/templates/${bBuild.templateID}/builds/${bBuild.buildID}`, { fromTemplate: 'a-snap', steps: [] });
  expect(fromA.status).toBe(202);
  expect(await eventuallyStatus(keyB, bBuild.templateID, bBuild.buildID)).toMatchObject({
    status: 'error',
    reason: { message: "template 'a-snap' not found" },
  });

  // Made public, A's snapshot is readable and usable by B, but still not B's to change.
  expect((await call(API_KEY, 'PATCH', `/v2/templates/${snap.snapshotID}`, { public: true })).status).toBe(200);
  expect((await call(keyB, 'GET', '/templates/aliases/a-snap')).body).toEqual({ templateID: snap.snapshotID, public: true });
  expect((await call(keyB, 'GET', `/templates/${snap.snapshotID}`)).status).toBe(200);
  expect((await call(keyB, 'DELETE', `/templates/${snap.snapshotID}`)).status).toBe(404);
  expect((await call(keyB, 'PATCH', `/v2/templates/${snap.snapshotID}`, { public: false })).status).toBe(404);
  expect((await call(keyB, 'GET', '/snapshots')).body).toEqual([]);
  for (const id of [snap.snapshotID, build.templateID]) expect((await call(API_KEY, 'DELETE', `/templates/${id}`)).status).toBe(204);
  expect((await call(keyB, 'DELETE', `/templates/${bBuild.templateID}`)).status).toBe(204);
}, 120_000);

async function eventuallyStatus(key: string, templateID: string, buildID: string): Promise<{ status: string }> {
  for (let i = 0; i < 200; i++) {
    const s = (await call(key, 'GET', `/templates/${templateID}/builds/${buildID}/status`)).body as { status: string };
    if (s.status === 'ready' || s.status === 'error') return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`build ${buildID} did not end`);
}

test("through the proxy, a request with a key of another team does not reach a sandbox, even with its token", async () => {
  // No key: the sandbox's own token opens it, as the SDKs send it.
  expect((await envd(t.server, sb.sandboxID, sb.envdAccessToken).fs.stat({ path: '/' })).entry?.path).toBe('/');
  const files = (id: string, token: string | undefined, key?: string) =>
    fetch(`${t.server.proxyUrl}/files?path=/etc/hostname`, {
      headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', ...(token ? { 'X-Access-Token': token } : {}), ...(key ? { 'X-API-Key': key } : {}) },
    });
  // A's key with B's sandbox and B's token: as if it did not exist.
  const refused = await files(sb.sandboxID, sb.envdAccessToken, API_KEY);
  expect(refused.status).toBe(502);
  expect(await refused.json()).toEqual({ sandboxId: sb.sandboxID, message: 'The sandbox was not found', code: 502 });
  // B's own key, or the admin credential, with the same token: through.
  expect((await files(sb.sandboxID, sb.envdAccessToken, keyB)).status).toBe(200);
  expect((await files(sb.sandboxID, sb.envdAccessToken, ADMIN_KEY)).status).toBe(200);
  // B's token does not open A's sandbox, with B's key or without.
  expect((await files(sa.sandboxID, sb.envdAccessToken, keyB)).status).toBe(502);
  expect((await files(sa.sandboxID, sb.envdAccessToken)).status).toBe(401);
  // A header that is no Paddock key is the sandbox's business, not a refusal.
  expect((await files(sb.sandboxID, sb.envdAccessToken, 'an-app-key')).status).toBe(200);
});

test('the admin routes take the admin credential only; the admin sees every team but makes nothing', async () => {
  for (const [method, path] of [
    ['GET', '/admin/teams'],
    ['POST', '/admin/teams'],
    ['GET', `/admin/teams/${teamB}/api-keys`],
    ['PATCH', `/admin/teams/${teamB}/limits`],
  ] as const) {
    const body = method === 'GET' ? undefined : {};
    for (const key of [API_KEY, keyB]) {
      expect(await call(key, method, path, body)).toMatchObject({
        status: 403,
        body: { code: 403, message: expect.stringContaining('takes the admin credential only, not an API key of a team') },
      });
    }
    expect((await call(undefined, method, path, body)).status).toBe(401);
  }
  expect((await call(`paddock_admin_${'f'.repeat(40)}`, 'GET', '/admin/teams')).body).toEqual({ code: 401, message: 'invalid admin credential' });

  const teams = await admin().listTeams();
  expect(teams.map((x) => x.name)).toEqual(['default', 'team-b']);
  expect(teams[1]).toMatchObject({ teamID: teamB, limits: { maxSandboxes: null, maxMemoryMB: null, maxDiskMB: null }, usage: { sandboxes: 1 } });
  expect((await call(ADMIN_KEY, 'GET', `/sandboxes/${sb.sandboxID}`)).status).toBe(200);
  expect((await call(ADMIN_KEY, 'GET', '/v2/sandboxes')).body.map((s: { sandboxID: string }) => s.sandboxID).sort()).toEqual([sa.sandboxID, sb.sandboxID].sort());
  expect(await call(ADMIN_KEY, 'POST', '/sandboxes', { templateID: 'base' })).toMatchObject({ status: 403, body: { message: expect.stringMatching(/admin credential belongs to no team/) } });

  // Keys of a team: made (shown once), listed without secrets, deleted; a team's keys are its own.
  const made = await admin().createTeamApiKey(teamB, { name: 'temp' });
  t.extraSecrets.push(made.key);
  const listed = await admin().listTeamApiKeys(teamB);
  expect(listed.map((k) => k.name)).toEqual(['b', 'temp']);
  expect(JSON.stringify(listed)).not.toContain(made.key.slice(8, -4));
  expect((await call(keyB, 'GET', '/api-keys')).body.map((k: { name: string }) => k.name)).toEqual(['b', 'temp']);
  const aKeyId = (await t.control.listApiKeys())[0]!.id;
  expect((await call(keyB, 'DELETE', `/api-keys/${aKeyId}`)).body).toEqual({ code: 404, message: `no API key has id '${aKeyId}'` });
  expect((await call(ADMIN_KEY, 'DELETE', `/admin/teams/${teamB}/api-keys/${aKeyId}`)).status).toBe(404);
  await admin().deleteTeamApiKey(teamB, made.id);
  expect((await call(made.key, 'GET', '/v2/sandboxes')).status).toBe(401);

  // A team with sandboxes stays; an unknown one is 404; a taken name 409.
  expect(await call(ADMIN_KEY, 'DELETE', `/admin/teams/${teamB}`)).toMatchObject({ status: 409, body: { message: "team 'team-b' has 1 sandbox running or paused; kill them first" } });
  expect((await call(ADMIN_KEY, 'GET', '/admin/teams/nosuch')).body).toEqual({ code: 404, message: "team 'nosuch' not found" });
  expect((await call(ADMIN_KEY, 'POST', '/admin/teams', { name: 'team-b' })).status).toBe(409);
  const empty = await admin().createTeam({ name: 'empty' });
  await admin().deleteTeam(empty.teamID);
  expect((await call(ADMIN_KEY, 'GET', `/admin/teams/${empty.teamID}`)).status).toBe(404);
});

test("a team's limits answer 429 naming the limit, at create and at resume", async () => {
  await admin().setTeamLimits(teamB, { maxSandboxes: 1 });
  expect(await call(keyB, 'POST', '/sandboxes', { templateID: 'base' })).toEqual({
    status: 429,
    headers: expect.anything(),
    body: { code: 429, message: "team 'team-b' may have at most 1 running sandbox (its maxSandboxes limit); it has 1 running sandbox, and this sandbox would make it 2 running sandboxes; kill or pause one first" },
  });
  // Another team is not held to B's limits.
  const other = await t.control.createSandbox({ templateID: 'base' });
  await t.control.killSandbox(other.sandboxID);

  // Paused, sb holds no place; a new one takes it, and sb's resume is refused.
  expect((await call(keyB, 'POST', `/sandboxes/${sb.sandboxID}/pause`)).status).toBe(204);
  const second = await call(keyB, 'POST', '/sandboxes', { templateID: 'base' });
  expect(second.status).toBe(201);
  expect(await call(keyB, 'POST', `/sandboxes/${sb.sandboxID}/connect`, { timeout: 60 })).toMatchObject({ status: 429, body: { message: expect.stringMatching(/maxSandboxes limit/) } });
  expect((await call(keyB, 'DELETE', `/sandboxes/${second.body.sandboxID}`)).status).toBe(204);

  const base = (await t.control.getTemplate('base')).template.builds[0]!;
  await admin().setTeamLimits(teamB, { maxSandboxes: null, maxMemoryMB: base.memoryMB - 1 });
  expect(await call(keyB, 'POST', `/sandboxes/${sb.sandboxID}/resume`, { timeout: 60 })).toMatchObject({
    status: 429,
    body: { message: `team 'team-b' may have at most ${base.memoryMB - 1} MiB of memory in running sandboxes (its maxMemoryMB limit); it has 0 MiB of memory in running sandboxes, and this sandbox would make it ${base.memoryMB} MiB of memory in running sandboxes; kill or pause one first` },
  });
  await admin().setTeamLimits(teamB, { maxMemoryMB: null, maxDiskMB: base.diskSizeMB });
  expect((await call(keyB, 'POST', `/sandboxes/${sb.sandboxID}/connect`, { timeout: 60 })).status).toBe(201);
  expect(await call(keyB, 'POST', '/sandboxes', { templateID: 'base' })).toMatchObject({ status: 429, body: { message: expect.stringMatching(/maxDiskMB limit/) } });
  expect((await admin().getTeam(teamB)).usage).toEqual({ sandboxes: 1, memoryMB: base.memoryMB, diskMB: base.diskSizeMB });
});

test("a dashboard session is its key's team on the API and the proxy; one of the admin credential sees every team", async () => {
  const signIn = async (key: string) => {
    const res = await fetch(`${t.server.apiUrl}/dashboard/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key }) });
    expect(res.status).toBe(201);
    return { cookie: res.headers.get('set-cookie')!.split(';')[0]!, session: (await res.json()) as { admin: boolean; teamID?: string; keyName: string } };
  };
  const withCookie = async (cookie: string, path: string) => {
    const res = await fetch(`${t.server.apiUrl}${path}`, { headers: { cookie } });
    return { status: res.status, body: (await res.json()) as unknown };
  };
  const b = await signIn(keyB);
  expect(b.session).toMatchObject({ admin: false, teamID: teamB, keyName: 'b' });
  expect(await withCookie(b.cookie, `/sandboxes/${sa.sandboxID}`)).toEqual({ status: 404, body: { code: 404, message: `sandbox '${sa.sandboxID}' not found` } });
  expect(((await withCookie(b.cookie, '/v2/sandboxes')).body as Array<{ sandboxID: string }>).map((s) => s.sandboxID)).toEqual([sb.sandboxID]);
  expect((await withCookie(b.cookie, '/admin/teams')).status).toBe(403);
  const proxied = await fetch(`${t.server.proxyUrl}/files?path=/etc/hostname`, {
    headers: { 'E2b-Sandbox-Id': sa.sandboxID, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sa.envdAccessToken!, cookie: b.cookie },
  });
  expect(proxied.status).toBe(502);

  const admin = await signIn(ADMIN_KEY);
  expect(admin.session).toMatchObject({ admin: true, keyName: 'admin' });
  expect(admin.session).not.toHaveProperty('teamID');
  expect(((await withCookie(admin.cookie, '/admin/teams')).body as Array<{ name: string }>).map((x) => x.name)).toEqual(['default', 'team-b']);
  expect((await withCookie(admin.cookie, `/sandboxes/${sa.sandboxID}`)).status).toBe(200);
});
