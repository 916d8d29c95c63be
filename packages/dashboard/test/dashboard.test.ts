// The dashboard in Debian's Chromium (driven by Playwright) against a real
// server: one server, one browser page and one sandbox for the whole file,
// the tests running in order as a person would: sign in, see a sandbox made
// with the SDK appear, watch its metrics, use its terminal and files, read
// its log, look at templates and keys, kill it, sign out. Every request the
// page made is checked at the end for secrets in its URL.
//
// PADDOCK_DASHBOARD_SHOTS=DIR saves a screenshot of each page there
// (docs/dashboard/ holds the committed ones).
import { Sandbox, Template } from '@paddock/sdk';
import { startServer, type PaddockServer } from '@paddock/server';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { auditLog, storedTokens } from '../../../tools/testing/log-audit.mjs';

const CHROMIUM = '/usr/bin/chromium';
const API_KEY = 'e2b_da5b0a4d00da5b0a4d00da5b0a4d00da5b0a4d00';
const SHOTS = process.env.PADDOCK_DASHBOARD_SHOTS;

let home: string;
let server: PaddockServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let sbx: Sandbox;
/** Every URL the browser asked for. */
const requested: string[] = [];
/** What the page was told and must never put in a URL. */
const secrets = new Set<string>([API_KEY]);

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`);
  home = mkdtempSync(join(tmpdir(), 'paddock-dashboard-'));
  server = await startServer({ home, apiPort: 0, proxyPort: 0, warmPoolSize: 0, metricsIntervalMs: 500, initialApiKey: API_KEY, logFile: join(home, 'server.log'), shutdownGraceMs: 1_000 });
  // Chromium's own sandbox needs an unprivileged user; these tests run as root.
  browser = await chromium.launch({ executablePath: CHROMIUM, chromiumSandbox: false, timeout: 60_000 });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  context.on('request', (r) => requested.push(r.url()));
  page = await context.newPage();
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await sbx?.kill().catch(() => undefined);
  await server?.close();
  const runtime = server?.runtime as unknown as { removeEverything(): Promise<void>; leftovers(): Promise<string[]> } | undefined;
  if (runtime) {
    await runtime.removeEverything();
    expect(await runtime.leftovers()).toEqual([]);
    auditLog(join(home, 'server.log'), [API_KEY, ...(await storedTokens(home))]);
  }
  rmSync(home, { recursive: true, force: true });
});

const shot = async (name: string) => {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`) });
};
const sdkOpts = () => ({ apiKey: API_KEY, apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl });

test('signing in with an API key sets an HttpOnly, SameSite=Strict cookie and opens the sandboxes page', async () => {
  await page.goto(`${server.apiUrl}/dashboard/`);
  await page.getByLabel('API key').waitFor();
  await shot('sign-in');
  await page.getByLabel('API key').fill('e2b_0000000000000000000000000000000000000bad');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('invalid API key').waitFor();
  await page.getByLabel('API key').fill(API_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Sandboxes' }).waitFor();
  const cookies = await context.cookies();
  expect(cookies).toEqual([expect.objectContaining({ name: 'paddock_session', httpOnly: true, sameSite: 'Strict', path: '/' })]);
  secrets.add(cookies[0]!.value);
  // The page cannot read its own cookie, and the page's URL holds no secret.
  expect(await page.evaluate(() => document.cookie)).toBe('');
  const csrf = await page.evaluate(async () => ((await (await fetch('/dashboard/session')).json()) as { csrfToken: string }).csrfToken);
  secrets.add(csrf);
});

test('a sandbox created through the SDK appears in the list with its template, state and metadata', async () => {
  sbx = await Sandbox.create('base', { ...sdkOpts(), metadata: { suite: 'dashboard' }, timeoutMs: 600_000 });
  const info = await sbx.getInfo();
  const row = page.locator(`tr[data-sandbox="${sbx.sandboxId}"]`);
  await row.waitFor({ timeout: 15_000 });
  expect(await row.textContent()).toMatch(new RegExp(`running.*base.*suite=dashboard`));
  const token = sbx.connectionInfo.envdAccessToken;
  expect(token).toBeTruthy();
  secrets.add(token!);
  expect(info.sandboxId).toBe(sbx.sandboxId);
  // The metadata filter finds it; another value does not.
  await page.getByPlaceholder('metadata: key=value, …').fill('suite=other');
  await page.getByText('No sandboxes match.').waitFor();
  await page.getByPlaceholder('metadata: key=value, …').fill('suite=dashboard');
  await row.waitFor();
  await shot('sandboxes');
});

test("the sandbox's metrics chart gains points as samples arrive", async () => {
  await page.locator(`a[href="#/sandboxes/${sbx.sandboxId}"]`).click();
  const cpu = page.locator('figure[data-chart="CPU"]');
  await cpu.waitFor();
  const points = async () => Number(await cpu.getAttribute('data-points'));
  await page.waitForFunction(() => Number(document.querySelector('figure[data-chart="CPU"]')?.getAttribute('data-points')) >= 2, undefined, { timeout: 20_000 });
  const before = await points();
  await page.waitForFunction((n) => Number(document.querySelector('figure[data-chart="CPU"]')?.getAttribute('data-points')) > n, before, { timeout: 20_000 });
  expect(await points()).toBeGreaterThan(before);
  expect(await cpu.locator('path.line').getAttribute('d')).toMatch(/^M[\d.]+,[\d.]+( L[\d.]+,[\d.]+)+$/);
  await shot('sandbox-metrics');
});

test('the terminal runs a command in the sandbox', async () => {
  await page.getByRole('link', { name: 'terminal' }).click();
  await page.getByTestId('terminal-status').getByText('connected').waitFor({ timeout: 30_000 });
  // Typed once the shell's prompt is there, so that the screen shows the command once.
  await page.locator('.xterm-rows', { hasText: '$' }).waitFor({ timeout: 20_000 });
  await page.getByTestId('terminal').click();
  await page.keyboard.type('echo "sum=$((40 + 2))" > /home/user/from-terminal.txt; echo "answer=$((6 * 7))"\n');
  await page.locator('.xterm-rows', { hasText: 'answer=42' }).waitFor({ timeout: 20_000 });
  expect(await sbx.files.read('/home/user/from-terminal.txt')).toBe('sum=42\n');
  await shot('sandbox-terminal');
});

test('files are listed, downloaded and uploaded', async () => {
  await sbx.files.write('/home/user/report.txt', 'numbers: 1 2 3\n');
  await page.getByRole('link', { name: 'files' }).click();
  const row = page.locator('tr[data-file="report.txt"]');
  await row.waitFor();
  const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: 'Download' }).click()]);
  expect(download.suggestedFilename()).toBe('report.txt');
  expect(readFileSync((await download.path())!, 'utf8')).toBe('numbers: 1 2 3\n');
  await page.locator('.upload input[type=file]').setInputFiles({ name: 'from-page.txt', mimeType: 'text/plain', buffer: Buffer.from('uploaded by the dashboard') });
  await page.locator('tr[data-file="from-page.txt"]').waitFor();
  expect(await sbx.files.read('/home/user/from-page.txt')).toBe('uploaded by the dashboard');
  await shot('sandbox-files');
});

test("the lifecycle log shows the sandbox's creation", async () => {
  await page.getByRole('link', { name: 'logs' }).click();
  await page.getByTestId('lifecycle-log').locator('tr').first().waitFor();
  expect(await page.getByTestId('lifecycle-log').textContent()).toMatch(/creat/i);
  await shot('sandbox-logs');
});

test('the expiry is extended from the sandbox page', async () => {
  await page.getByLabel('minutes').fill('30');
  await page.getByRole('button', { name: 'Set expiry (min from now)' }).click();
  await page.getByText('expires in 30 min').waitFor();
  const left = (await sbx.getInfo()).endAt.getTime() - Date.now();
  expect(left).toBeGreaterThan(29 * 60_000);
});

test("a template build's log is followed live as it runs", async () => {
  const build = await Template.buildInBackground(Template().fromTemplate('base').runCmd('for i in 1 2 3; do echo "counting $i"; sleep 0.5; done'), { ...sdkOpts(), alias: 'counted' });
  await page.getByRole('link', { name: 'Templates' }).click();
  await page.getByTestId('templates').locator('tr', { hasText: 'counted' }).waitFor();
  await shot('templates');
  await page.goto(`${server.apiUrl}/dashboard/#/templates/${build.templateId}/${build.buildId}`);
  const log = page.getByTestId('build-log');
  // A line that comes while the page is already showing the build's earlier ones.
  await log.getByText('counting 1').waitFor({ timeout: 60_000 });
  await log.getByText('counting 3').waitFor({ timeout: 30_000 });
  await page.locator('h2 .state.ready').waitFor({ timeout: 60_000 });
  await shot('template');
});

test('API keys are listed', async () => {
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByTestId('api-keys').getByText('this session').waitFor();
  await shot('api-keys');
});

test('killing the sandbox from its page removes it', async () => {
  await page.goto(`${server.apiUrl}/dashboard/#/sandboxes/${sbx.sandboxId}`);
  await page.getByRole('button', { name: 'Kill', exact: true }).click();
  await page.getByRole('button', { name: `Really kill ${sbx.sandboxId}` }).click();
  await page.getByRole('heading', { name: 'Sandboxes' }).waitFor();
  await page.getByText('No sandboxes match.').waitFor({ timeout: 15_000 });
  await expect(Sandbox.getInfo(sbx.sandboxId, sdkOpts())).rejects.toThrow(/not found/i);
});

test('a state-changing request with the cookie but no CSRF token is refused; signing out ends the session', async () => {
  const refused = await page.evaluate(async () => (await fetch('/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"csrf"}' })).status);
  expect(refused).toBe(403);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').waitFor();
  expect(await page.evaluate(async () => (await fetch('/v2/sandboxes')).status)).toBe(401);
  expect(await context.cookies()).toEqual([]);
});

test('no URL the page requested holds a key, a session, a CSRF or an access token', () => {
  expect(requested.length).toBeGreaterThan(20);
  // envd through the proxy, at the sandbox's own host.
  expect(requested.some((u) => u.includes(`49983-${sbx.sandboxId}.`))).toBe(true);
  for (const url of requested) {
    for (const s of secrets) expect(url.includes(s) ? `${url} holds a secret` : url).toBe(url);
    expect(url).not.toMatch(/[?&](signature|access_token|token|key)=/i);
  }
});
