#!/usr/bin/env node
// The downstream check: the client packages as a service or web app that
// depends on them gets them. Every public package is packed with `npm pack`;
// the SDK's tarballs (sdk, control-client, envd-client, models, protocol)
// are installed with `npm install` in a fresh directory outside the
// workspace, third-party dependencies coming from the registry; then, against
// a real Paddock server started here:
//
//   - an ES module script and a CommonJS script (node),
//   - `tsc --strict` under node16 and under bundler module resolution, the
//     latter as a web app would: no @types/node, no skipLibCheck,
//   - the SDK bundled by esbuild for the browser and run in Chromium
//     (playwright-core) from an origin of its own: a sandbox created, a
//     command run, a file read.
//
// Each step prints `ok` or what failed; the exit code is the number of
// failed steps. Needs root, runc and the base image, as the tests do (run it
// after `npm test`, which makes the base image).
//
//   node tools/packaging/downstream.mjs [--keep]   (--keep leaves the directory for a look)
import { auditLog, storedTokens } from '../testing/log-audit.mjs';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { publicPackages, repoRoot } from './packages.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, 'downstream');
const SDK_STACK = ['@paddock/sdk', '@paddock/control-client', '@paddock/envd-client', '@paddock/models', '@paddock/protocol'];
const CHROMIUM = process.env.PADDOCK_CHROMIUM ?? '/usr/bin/chromium';
const API_KEY = 'e2b_d0c0d0c0d0c0d0c0d0c0d0c0d0c0d0c0d0c0d0c0';
const keep = process.argv.includes('--keep');
const typesNode = JSON.parse(readFileSync(join(repoRoot, 'node_modules/@types/node/package.json'), 'utf8')).version;

// Image store and caches as the tests share them (tools/jest/run.mjs).
const cache = process.env.PADDOCK_TEST_CACHE ?? '/var/tmp/paddock-test-cache';
process.env.PADDOCK_IMAGES_DIR ??= join(cache, 'layers');
process.env.PADDOCK_CACHE_DIR ??= cache;

const results = [];
async function step(name, fn) {
  const started = Date.now();
  process.stdout.write(`::: downstream: ${name}\n`);
  try {
    await fn();
    results.push({ name, ok: true });
    process.stdout.write(`${name}: ok (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  } catch (err) {
    results.push({ name, ok: false });
    process.stdout.write(`${name}: FAILED\n${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
  }
}

function run(cmd, args, options = {}) {
  const res = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, timeout: 10 * 60_000, ...options });
  if (res.error) throw new Error(`${cmd} ${args.join(' ')} could not run: ${res.error.message}`);
  if (res.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} exited ${res.status ?? res.signal}:\n${res.stdout}${res.stderr}`);
  }
  return res.stdout;
}

/** A script against the server, which runs in this process: its event loop must stay free, so never spawnSync. */
function runScript(file, env) {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [file], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 5 * 60_000 });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', fail);
    child.on('close', (code, signal) => (code === 0 ? done(output) : fail(new Error(`node ${file} exited ${code ?? signal}:\n${output}`))));
  });
}

const work = mkdtempSync(join(tmpdir(), 'paddock-downstream-'));
// The server's data directory is in here, and a sandbox's root (a mapped id) must be able to pass through.
chmodSync(work, 0o711);
const tarballs = join(work, 'tarballs');
const app = join(work, 'app');
mkdirSync(tarballs);
mkdirSync(app);

let server;
let site;
let browser;
try {
  run('npx', ['turbo', 'run', 'build', '--filter=@paddock/sdk...', '--filter=@paddock/server...', '--output-logs=errors-only'], { cwd: repoRoot });

  /** name → tarball path */
  const packed = new Map();
  await step('npm pack every public package', () => {
    const args = ['pack', '--json', '--pack-destination', tarballs, ...publicPackages().flatMap((p) => ['-w', p.dir])];
    for (const p of JSON.parse(run('npm', args, { cwd: repoRoot }))) packed.set(p.name, join(tarballs, p.filename));
    const missing = publicPackages().filter((p) => !packed.has(p.name));
    if (missing.length > 0) throw new Error(`not packed: ${missing.map((p) => p.name).join(', ')}`);
  });

  await step('npm install of the SDK tarballs in a fresh directory', () => {
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'paddock-downstream', private: true, version: '1.0.0' }, null, 2));
    for (const f of readdirSync(fixtures)) copyFileSync(join(fixtures, f), join(app, f));
    // The same program once more as an ES module: node16 resolves `import` conditions for it, `require` ones for typed.ts.
    copyFileSync(join(fixtures, 'typed.ts'), join(app, 'typed.mts'));
    const stack = SDK_STACK.map((name) => {
      const file = packed.get(name);
      if (!file) throw new Error(`${name} was not packed`);
      return file;
    });
    // Outside the workspace: no workspace links, no hoisted packages of the repository.
    run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', ...stack, `@types/node@${typesNode}`], { cwd: app });
    for (const name of SDK_STACK) {
      const installed = join(app, 'node_modules', name, 'package.json');
      if (!existsSync(installed)) throw new Error(`${name} is not in ${app}/node_modules`);
    }
  });

  const tsc = join(repoRoot, 'node_modules/typescript/bin/tsc');
  await step('tsc --strict, module node16', () => run(process.execPath, [tsc, '-p', 'tsconfig.node16.json'], { cwd: app }));
  await step('tsc --strict, moduleResolution bundler, no @types/node', () => {
    // A web app's project: DOM types, no Node types, and every declaration checked (no skipLibCheck), so that
    // a Node type leaking into the declarations the `default` condition gives fails here.
    rmSync(join(app, 'node_modules/@types/node'), { recursive: true, force: true });
    try {
      run(process.execPath, [tsc, '-p', 'tsconfig.bundler.json'], { cwd: app });
    } finally {
      run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--no-save', `@types/node@${typesNode}`], { cwd: app });
    }
  });

  let bundle = '';
  await step('esbuild bundle for the browser', async () => {
    const out = await build({
      entryPoints: [join(app, 'browser-entry.mjs')],
      absWorkingDir: app,
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    // The browser builds, not Node's: no undici, no connect-node, no Dockerfile parser, none of the SDK's Node-only modules.
    const nodeOnly = Object.keys(out.metafile.inputs).filter(
      (p) =>
        /node_modules\/(undici|@connectrpc\/connect-node|dockerfile-ast|tar)\//.test(p) ||
        p.includes('/dist/node.js') ||
        /@paddock\/sdk\/dist\/(dockerfile|proxy|template-files)\.js$/.test(p),
    );
    if (nodeOnly.length > 0) throw new Error(`the browser bundle holds Node-only modules: ${nodeOnly.join(', ')}`);
    for (const pkg of ['envd-client', 'control-client']) {
      if (!Object.keys(out.metafile.inputs).some((p) => p.endsWith(`node_modules/@paddock/${pkg}/dist/browser.js`))) {
        throw new Error(`the browser bundle does not hold @paddock/${pkg}'s browser build`);
      }
    }
    bundle = out.outputFiles[0].text;
  });

  site = await staticSite(() => bundle);
  const { startServer } = await import('@paddock/server');
  server = await startServer({
    home: join(work, 'home'),
    apiPort: 0,
    proxyPort: 0,
    warmPoolSize: 0,
    initialApiKey: API_KEY,
    corsOrigins: [site.origin],
    // Its log goes to a file, read back at the end: JSON lines, none with a key or token.
    logFile: join(work, 'server.log'),
  });
  const env = { ...process.env, PADDOCK_API_URL: server.apiUrl, PADDOCK_SANDBOX_URL: server.proxyUrl, PADDOCK_API_KEY: API_KEY };

  await step('node: ES module script', () => runScript('esm.mjs', env));
  await step('node: CommonJS script', () => runScript('cjs.cjs', env));
  await step('browser: the bundle in Chromium', async () => {
    if (!bundle) throw new Error('no bundle: its step failed');
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`);
    // Chromium's own sandbox needs an unprivileged user; CI runs as root.
    browser = await chromium.launch({ executablePath: CHROMIUM, chromiumSandbox: false, timeout: 60_000 });
    const page = await browser.newPage();
    const logs = [];
    page.on('console', (m) => logs.push(m.text()));
    page.on('pageerror', (e) => logs.push(String(e)));
    await page.goto(`${site.origin}/`);
    await page.waitForFunction("document.title !== ''", undefined, { timeout: 30_000 });
    if ((await page.title()) !== 'ready') throw new Error(`the page did not load the bundle: ${await page.title()}\n${logs.join('\n')}`);
    const got = await page.evaluate(
      async ({ apiUrl, sandboxUrl, apiKey }) => {
        const { Sandbox, CommandExitError } = globalThis.paddock;
        const sbx = await Sandbox.create({ apiUrl, sandboxUrl, apiKey, timeoutMs: 120_000 });
        try {
          const run = await sbx.commands.run('echo "$((6 * 7)) from $(uname -s)" > /home/user/page.txt && cat /home/user/page.txt');
          const read = await sbx.files.read('/home/user/page.txt');
          await sbx.files.write('/home/user/from-page.txt', 'written by a page');
          const back = await sbx.files.read('/home/user/from-page.txt');
          let failure = '';
          try {
            await sbx.commands.run('exit 3');
          } catch (e) {
            failure = e instanceof CommandExitError ? `exit ${e.exitCode}` : `not a CommandExitError: ${e}`;
          }
          return { stdout: run.stdout, read, back, failure };
        } finally {
          await sbx.kill();
        }
      },
      { apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl, apiKey: API_KEY },
    );
    const want = { stdout: '42 from Linux\n', read: '42 from Linux\n', back: 'written by a page', failure: 'exit 3' };
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new Error(`the page got ${JSON.stringify(got)}, wanted ${JSON.stringify(want)}\n${logs.join('\n')}`);
    }
  });
} catch (err) {
  results.push({ name: 'setup', ok: false });
  console.error(err);
} finally {
  await browser?.close().catch(() => undefined);
  site?.server.close();
  if (server) {
    await server.close();
    await server.runtime.removeEverything?.();
    try {
      auditLog(join(work, 'server.log'), [API_KEY, ...(await storedTokens(join(work, 'home')))]);
      results.push({ name: "the server's log", ok: true });
    } catch (err) {
      results.push({ name: "the server's log", ok: false });
      console.error(err.message);
    }
  }
  if (keep) console.log(`left ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

const failed = results.filter((r) => !r.ok);
console.log(`downstream: ${results.length - failed.length} passed, ${failed.length} failed${failed.length ? `: ${failed.map((r) => r.name).join('; ')}` : ''}`);
process.exit(failed.length);

/** A page and the bundle, on an origin of their own (not the API's, so every call is cross-origin). */
async function staticSite(getBundle) {
  const page = `<!doctype html><meta charset="utf-8">
<script type="module">
import('./paddock.js').then((m) => { window.paddock = m; document.title = 'ready'; }, (e) => { document.title = 'failed: ' + e; });
</script>`;
  const s = createServer((req, res) => {
    if (req.url === '/paddock.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(getBundle());
    else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(page);
    else res.writeHead(404).end();
  });
  await new Promise((done) => s.listen(0, '127.0.0.1', done));
  return { origin: `http://127.0.0.1:${s.address().port}`, server: s };
}

