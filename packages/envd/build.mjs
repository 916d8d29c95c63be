// Builds envd into a self-contained directory, dist/: the bundled entry
// points, the native addon and node-pty (native too, so it cannot be
// bundled). The runtime mounts dist/ read-only into every sandbox and runs
// `node /…/main.js` there, so nothing may be loaded from outside it.
import { build } from 'esbuild';
import { chmodSync, cpSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const here = import.meta.dirname;
const dist = join(here, 'dist');
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));

await build({
  entryPoints: { main: join(here, 'src/main.ts'), index: join(here, 'src/index.ts') },
  outdir: dist,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  external: ['node-pty'],
  define: { __ENVD_VERSION__: JSON.stringify(pkg.version) },
  // Bundled CommonJS dependencies call require() for Node's built-ins.
  banner: { js: "import { createRequire as __envdCreateRequire } from 'node:module'; const require = __envdCreateRequire(import.meta.url);" },
  sourcemap: true,
  logLevel: 'warning',
});
chmodSync(join(dist, 'main.js'), 0o755);

cpSync(join(here, 'build/Release/envd_native.node'), join(dist, 'envd_native.node'));

const ptyDir = dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
const ptyOut = join(dist, 'node_modules/node-pty');
rmSync(ptyOut, { recursive: true, force: true });
mkdirSync(join(ptyOut, 'build/Release'), { recursive: true });
cpSync(join(ptyDir, 'package.json'), join(ptyOut, 'package.json'));
cpSync(join(ptyDir, 'lib'), join(ptyOut, 'lib'), { recursive: true, filter: (src) => !src.endsWith('.test.js') && !src.endsWith('.map') });
cpSync(join(ptyDir, 'build/Release/pty.node'), join(ptyOut, 'build/Release/pty.node'));
