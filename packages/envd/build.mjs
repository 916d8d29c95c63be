// Builds envd. What the runtime imports is dist/index.js (ESM) and its
// types; what sandboxes run is dist/sandbox/, a directory that needs
// nothing of the image it is mounted into (read-only, at /.paddock):
//
//   sandbox/bin/node              the node that runs this build
//   sandbox/lib/                  the dynamic loader and every shared library node and the
//                                 native addons need, copied from where the host's ldd finds them
//   sandbox/envd/main.cjs         the entry point (src/launcher.ts)
//   sandbox/envd/envd.cjs         envd (src/main.ts and all it uses), CommonJS, loaded by main.cjs
//   sandbox/envd/envd.cjs.cache   V8's code cache for envd.cjs, made by sandbox/bin/node while it
//                                 served what a new sandbox's envd serves first
//   sandbox/envd/tools.cjs        the build tools that template build steps run (src/tools/main.ts),
//                                 CommonJS, run by the same node (envdToolCommand)
//   sandbox/envd/envd_native.node                 envd's native addon
//   sandbox/envd/build/Release/pty.node           node-pty's, where its loader looks beside the bundle
//   sandbox.json                  the loader's name, for envdCommand (src/index.ts), and the
//                                 version of the node in bin/
//
// Files are copied, not linked, so that nothing in the directory points
// outside it. node and the libraries are copied again only when their
// source changed (size or modification time), as they are most of the
// directory's size.
import { build } from 'esbuild';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Process } from '@paddock/models';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { basename, dirname, join } from 'node:path';

const here = import.meta.dirname;
const dist = join(here, 'dist');
const sandbox = join(dist, 'sandbox');
const bundleDir = join(sandbox, 'envd');
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
const common = { bundle: true, platform: 'node', target: 'node20', sourcemap: true, logLevel: 'warning' };

// The layout before dist/sandbox: entry points and addons at the top of dist/.
for (const old of ['main.cjs', 'main.cjs.map', 'envd.cjs', 'envd.cjs.map', 'envd.cjs.cache', 'envd_native.node', 'node_modules']) {
  rmSync(join(dist, old), { recursive: true, force: true });
}

await build({
  ...common,
  entryPoints: { index: join(here, 'src/index.ts') },
  outdir: dist,
  format: 'esm',
});

const cjs = {
  ...common,
  outdir: bundleDir,
  outExtension: { '.js': '.cjs' },
  format: 'cjs',
  define: {
    __ENVD_VERSION__: JSON.stringify(pkg.version),
    // The sources are ES modules; in the CommonJS bundle a module's file is __filename.
    'import.meta.dirname': '__dirname',
    'import.meta.url': 'importMetaUrl',
  },
  inject: [join(here, 'src/cjs-import-meta.ts')],
};
// envd alone gets the light Headers (src/web-headers.ts): in the launcher,
// which V8's code cache does not cover, it would be compiled at every start.
await build({ ...cjs, entryPoints: { envd: join(here, 'src/main.ts') }, inject: [...cjs.inject, join(here, 'src/web-headers.ts')] });
await build({ ...cjs, entryPoints: { main: join(here, 'src/launcher.ts'), tools: join(here, 'src/tools/main.ts') } });
chmodSync(join(bundleDir, 'main.cjs'), 0o755);

const addon = join(bundleDir, 'envd_native.node');
cpSync(join(here, 'build/Release/envd_native.node'), addon);

// node-pty's JavaScript is bundled; it requires its addon by a path relative
// to the requiring module (../build/Release/, then ./build/Release/), which
// here is the bundle.
rmSync(join(bundleDir, 'node_modules'), { recursive: true, force: true });
const ptyDir = dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
const ptyAddon = join(bundleDir, 'build/Release/pty.node');
mkdirSync(dirname(ptyAddon), { recursive: true });
cpSync(join(ptyDir, 'build/Release/pty.node'), ptyAddon);

/**
 * What `file` needs from the dynamic linker, as ldd resolves it on this
 * host: the loader (its ELF interpreter) and each shared library by the
 * name it is asked for. ldd runs without LD_LIBRARY_PATH or LD_PRELOAD, so
 * that only the host's own libraries are taken.
 */
function sharedObjects(file) {
  const out = execFileSync('ldd', [file], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  const libs = new Map();
  let loader;
  for (const line of out.split('\n')) {
    if (line.includes('=> not found')) throw new Error(`${file} needs a library this host does not have: ${line.trim()}`);
    const lib = /^\s*(\S+) => (\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    if (lib) libs.set(lib[1], lib[2]);
    const interp = /^\s*(\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    if (interp) loader = interp[1];
  }
  return { loader, libs };
}

/** Copies `src` (followed if a link) to `dest` unless `dest` already has its size and modification time. */
function copyIfChanged(src, dest) {
  const from = statSync(src);
  try {
    const to = statSync(dest);
    if (to.size === from.size && Math.trunc(to.mtimeMs) === Math.trunc(from.mtimeMs)) return;
  } catch {
    // not there yet
  }
  // Beside it and renamed: a running sandbox keeps the file it mapped.
  const tmp = `${dest}.tmp`;
  copyFileSync(src, tmp);
  chmodSync(tmp, from.mode & 0o755);
  utimesSync(tmp, from.atime, from.mtime);
  renameSync(tmp, dest);
}

const node = realpathSync(process.execPath);
const needs = [node, addon, ptyAddon].map(sharedObjects);
const loader = needs[0].loader;
if (!loader) throw new Error(`${node} has no dynamic loader; envd's sandbox directory is made for a dynamically linked node`);
for (const [i, n] of needs.entries()) {
  if (n.loader && n.loader !== loader) throw new Error(`${[node, addon, ptyAddon][i]} wants the loader ${n.loader}, node ${loader}`);
}
const libs = new Map(needs.flatMap((n) => [...n.libs]));
libs.set(basename(loader), loader);

const wanted = { bin: new Map([['node', node]]), lib: libs };
for (const [dir, files] of Object.entries(wanted)) {
  mkdirSync(join(sandbox, dir), { recursive: true });
  for (const [name, path] of files) copyIfChanged(path, join(sandbox, dir, name));
  // What an older build or an interrupted copy left.
  for (const name of readdirSync(join(sandbox, dir))) {
    if (!files.has(name)) rmSync(join(sandbox, dir, name), { recursive: true, force: true });
  }
}
writeFileSync(join(dist, 'sandbox.json'), JSON.stringify({ loader: basename(loader), node: process.version }, null, 2) + '\n');

// Last, once the directory is complete: the cache is made by the
// sandbox's own node through its own loader, with the options envd always
// runs with (V8 refuses a cache made with others) and an empty environment,
// as a sandbox's envd has. That node loads envd.cjs as main.cjs does and
// starts envd on a socket of its own; the requests every new sandbox gets
// first (src/launcher.ts) are sent to it, and the cache is written when its
// standard input closes, with what they compiled.
const { envdCommand } = await import(join(dist, 'index.js'));
const cacheFile = join(bundleDir, 'envd.cjs.cache');
const scratch = mkdtempSync(join(tmpdir(), 'envd-code-cache-'));
try {
  const socketPath = join(scratch, 'envd.sock');
  // Commands run as whoever builds: root in CI and on servers, where the
  // runtime's image user would be; otherwise the build's own user, whom envd
  // may start processes as.
  const user = process.getuid?.() === 0 ? 'root' : userInfo().username;
  const [program, ...args] = envdCommand({ root: sandbox, args: ['--write-code-cache', cacheFile, '--socket', socketPath, '--default-user', user] });
  const maker = spawn(program, args, { stdio: ['pipe', 'inherit', 'pipe'], env: {} });
  const exited = new Promise((resolve, reject) => {
    maker.once('error', reject);
    maker.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`envd's code cache was not made: its maker ended with ${signal ?? `exit code ${code}`}\n${logs}`))));
  });
  let logs = '';
  const ready = new Promise((resolve, reject) => {
    maker.stderr.on('data', (chunk) => {
      logs += chunk;
      if (logs.includes('"msg":"ready"')) resolve();
    });
    exited.then(() => reject(new Error(`envd's code cache maker ended before envd was ready\n${logs}`)), reject);
  });
  const deadline = setTimeout(() => maker.kill(), 60_000);
  try {
    await ready;
    await warmUp(socketPath);
  } finally {
    clearTimeout(deadline);
    maker.stdin.end();
    await exited;
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

/**
 * What a new sandbox's envd serves first: the runtime's /health and /init,
 * then a command in each Connect format (JSON for E2B's SDKs, binary for
 * Paddock's), run as envd's default user.
 */
async function warmUp(socketPath) {
  const token = 'code-cache';
  const call = (method, path, body) =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath, method, path, headers: { 'content-type': 'application/json', 'x-access-token': token } }, (res) => {
        res.resume();
        res.once('end', () => (res.statusCode < 300 ? resolve() : reject(new Error(`${method} ${path} answered ${res.statusCode}`))));
      });
      req.once('error', reject);
      req.end(body);
    });
  await call('GET', '/health');
  await call('POST', '/init', JSON.stringify({ accessToken: token, timestamp: new Date().toISOString() }));
  for (const useBinaryFormat of [false, true]) {
    const transport = createConnectTransport({
      baseUrl: 'http://localhost',
      httpVersion: '1.1',
      useBinaryFormat,
      nodeOptions: { socketPath },
      interceptors: [(next) => (req) => (req.header.set('X-Access-Token', token), next(req))],
    });
    let ended = false;
    for await (const res of createClient(Process, transport).start({ process: { cmd: '/bin/true', args: [], envs: {} }, stdin: false })) {
      if (res.event?.event.case === 'end') ended = true;
    }
    if (!ended) throw new Error("envd's code cache: the warm-up command did not end");
  }
}
