// The official e2b SDK in a web page: bundled for the browser with esbuild,
// loaded by Debian's Chromium (driven by Playwright) from an origin of its
// own, talking cross-origin to the control API and, through the proxy, to
// envd. Two pages: one from an origin the server lets in, which creates a
// sandbox, runs a command and reads and writes files; one from an origin it
// does not, which the browser stops at the first preflight.
import { build } from 'esbuild';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import type * as e2b from 'e2b';
import { Sandbox, SandboxNotFoundError } from 'e2b';
import { chromium, type Browser } from 'playwright-core';
import { API_KEY, startForE2b, type CompatServer } from './harness.js';

const CHROMIUM = '/usr/bin/chromium';

/** What the page's `window.e2b` holds: the SDK's module, as bundled. */
type E2b = typeof e2b;

/**
 * e2b's one bundle serves Node and browsers alike; in a page the code that
 * needs these (templates from Dockerfiles and local files) is never reached,
 * so each becomes an empty CommonJS module.
 */
const NODE_ONLY = /^(node:.*|dockerfile-ast)$/;

async function bundleSdk(): Promise<string> {
  const out = await build({
    stdin: { contents: "export { Sandbox, CommandExitError } from 'e2b';", resolveDir: import.meta.dirname, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'silent',
    plugins: [
      {
        name: 'node-only',
        setup(b) {
          b.onResolve({ filter: NODE_ONLY }, (args) => ({ path: args.path, namespace: 'node-only' }));
          b.onLoad({ filter: /.*/, namespace: 'node-only' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
        },
      },
    ],
  });
  return out.outputFiles[0].text;
}

/** A static site: the page and the bundle, on its own origin. */
async function site(bundle: string): Promise<{ origin: string; server: Server }> {
  const page = `<!doctype html><meta charset="utf-8">
<script type="module">
import('./e2b.js').then((m) => { window.e2b = m; document.title = 'ready'; }, (e) => { document.title = 'failed: ' + e; });
</script>`;
  const server = createServer((req, res) => {
    if (req.url === '/e2b.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
    else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(page);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let c: CompatServer;
let browser: Browser;
let allowed: { origin: string; server: Server };
let refused: { origin: string; server: Server };

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`);
  const bundle = await bundleSdk();
  allowed = await site(bundle);
  refused = await site(bundle);
  c = await startForE2b({ corsOrigins: [allowed.origin] });
  // Chromium's own sandbox needs an unprivileged user; these tests run as root.
  browser = await chromium.launch({ executablePath: CHROMIUM, chromiumSandbox: false, timeout: 60_000 });
});

afterAll(async () => {
  await browser?.close();
  for (const s of [allowed, refused]) s?.server.close();
  await c?.teardown();
});

async function open(origin: string) {
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  await page.waitForFunction("document.title !== ''", undefined, { timeout: 30_000 });
  expect(await page.title()).toBe('ready');
  return page;
}

test('a page creates a sandbox with the official SDK, runs a command and reads and writes files', async () => {
  const page = await open(allowed.origin);
  try {
    const got = await page.evaluate(
      async ({ apiUrl, sandboxUrl, apiKey }) => {
        const { Sandbox, CommandExitError } = (globalThis as unknown as { e2b: E2b }).e2b;
        const sbx = await Sandbox.create('base', { apiUrl, sandboxUrl, apiKey });
        try {
          const run = await sbx.commands.run('echo "$((6 * 7)) from $(uname -s)" > made.txt && cat made.txt');
          const made = await sbx.files.read('/home/user/made.txt');
          await sbx.files.write('from-page.txt', 'written by a page');
          const back = await sbx.commands.run('cat /home/user/from-page.txt');
          let failure = '';
          try {
            await sbx.commands.run('exit 3');
          } catch (e) {
            failure = e instanceof CommandExitError ? `${e.exitCode}: ${e.message}` : String(e);
          }
          const list = (await sbx.files.list('/home/user')).map((e: { name: string }) => e.name).sort();
          return { id: sbx.sandboxId, stdout: run.stdout, made, back: back.stdout, failure, list };
        } finally {
          await sbx.kill();
        }
      },
      { apiUrl: c.server.apiUrl, sandboxUrl: c.server.proxyUrl, apiKey: API_KEY },
    );
    expect(got).toMatchObject({
      stdout: '42 from Linux\n',
      made: '42 from Linux\n',
      back: 'written by a page',
      failure: '3: exit status 3',
    });
    expect(got.list).toEqual(expect.arrayContaining(['from-page.txt', 'made.txt']));
    // It was this server's sandbox, and the page's kill reached it.
    expect(await Sandbox.list().nextItems()).toEqual([]);
    await expect(Sandbox.getInfo(got.id)).rejects.toThrow(SandboxNotFoundError);
  } finally {
    await page.close();
  }
});

test('a page from an origin the server does not let in cannot use it', async () => {
  const page = await open(refused.origin);
  const messages: string[] = [];
  page.on('console', (m) => messages.push(m.text()));
  try {
    const error = await page.evaluate(
      async ({ apiUrl, sandboxUrl, apiKey }) => {
        const { Sandbox } = (globalThis as unknown as { e2b: E2b }).e2b;
        try {
          await Sandbox.create('base', { apiUrl, sandboxUrl, apiKey });
          return 'created';
        } catch (e) {
          return String(e);
        }
      },
      { apiUrl: c.server.apiUrl, sandboxUrl: c.server.proxyUrl, apiKey: API_KEY },
    );
    expect(error).toMatch(/Failed to fetch/);
    expect(messages.join('\n')).toMatch(/blocked by CORS policy/);
    expect(await Sandbox.list().nextItems()).toEqual([]);
  } finally {
    await page.close();
  }
});
