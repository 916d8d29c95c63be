// Per-key limits as the official SDK meets them: a create over the rate is
// answered 429 with Retry-After, which the SDK waits out and retries by
// itself; a create over the running sandboxes a key may have is a 429
// without one, which the SDK raises as RateLimitError. A team's limits are
// met the same way, and another team's sandboxes are not there for the SDK.
import { ControlClient } from '@paddock/control-client';
import { NotFoundError, RateLimitError, Sandbox } from 'e2b';
import { API_KEY, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
beforeAll(async () => {
  c = await startForE2b({ maxSandboxesPerKey: 2, createRate: 0.2, createBurst: 1 });
});
afterAll(() => c.teardown());

test('over the rate: 429 with Retry-After, waited out by the SDK; over the running sandboxes: RateLimitError', async () => {
  // Two at once: the bucket holds one create, and the server says how long until the next.
  const post = () =>
    fetch(`${c.server.apiUrl}/sandboxes`, { method: 'POST', headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ templateID: 'base' }) });
  const answers = await Promise.all([post(), post()]);
  expect(answers.map((r) => r.status).sort()).toEqual([201, 429]);
  const made = answers.find((r) => r.status === 201)!;
  const raw = answers.find((r) => r.status === 429)!;
  const a = await Sandbox.connect(((await made.json()) as { sandboxID: string }).sandboxID);
  const wait = Number(raw.headers.get('retry-after'));
  expect(wait).toBeGreaterThanOrEqual(1);
  expect(wait).toBeLessThanOrEqual(5);
  expect(await raw.json()).toEqual({ code: 429, message: expect.stringMatching(/creates sandboxes faster than this server allows \(0\.2 a second, PADDOCK_CREATE_RATE\); retry in \d s/) });

  // The SDK retries after Retry-After and gets its sandbox.
  const started = performance.now();
  const b = await Sandbox.create('base');
  expect(performance.now() - started).toBeGreaterThanOrEqual(900);

  // Two running: a third is refused however long one waits, until one ends.
  const refused = await Sandbox.create('base').catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(RateLimitError);
  expect((refused as Error).message).toMatch(/has 2 running sandboxes, the most this server allows one key \(PADDOCK_MAX_SANDBOXES_PER_KEY\)/);

  await a.kill();
  const d = await Sandbox.create('base');
  expect((await d.commands.run('echo ok')).stdout).toBe('ok\n');
  for (const s of [b, d]) await s.kill();
});

test("a team's limit is a RateLimitError naming it; another team's sandbox is not found, nor listed", async () => {
  const admin = new ControlClient({ apiUrl: c.server.apiUrl, apiKey: c.server.createdAdminKey!, retries: { maxRetries: 0 } });
  const team = await admin.createTeam({ name: 'sdk-team', limits: { maxSandboxes: 1 } });
  // Two keys of the team, each with its own create rate.
  const [k1, k2] = [(await admin.createTeamApiKey(team.teamID, { name: 'one' })).key, (await admin.createTeamApiKey(team.teamID, { name: 'two' })).key];
  const theirs = await Sandbox.create('base', { apiKey: k1 });
  const refused = await Sandbox.create('base', { apiKey: k2 }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(RateLimitError);
  expect((refused as Error).message).toMatch(/team 'sdk-team' may have at most 1 running sandbox \(its maxSandboxes limit\)/);

  // The first team's key (the SDK's E2B_API_KEY) neither finds nor lists it.
  await expect(Sandbox.connect(theirs.sandboxId)).rejects.toBeInstanceOf(NotFoundError);
  await expect(Sandbox.getInfo(theirs.sandboxId)).rejects.toBeInstanceOf(NotFoundError);
  expect((await Sandbox.list().nextItems()).map((s) => s.sandboxId)).not.toContain(theirs.sandboxId);
  expect((await Sandbox.list({ apiKey: k2 }).nextItems()).map((s) => s.sandboxId)).toEqual([theirs.sandboxId]);
  await theirs.kill();
});
