// Builds envd into a self-contained directory, dist/: the bundled entry
// points, the code cache of the main bundle, the native addon and node-pty
// (native too, so it cannot be bundled). The runtime mounts dist/ read-only
// into every sandbox and runs `node /…/main.cjs` there, so nothing may be
// loaded from outside it.
//
//   index.js          what the runtime imports (ESM): where dist/ is, envd's node options
//   main.cjs          the entry point (src/launcher.ts)
//   envd.cjs          envd (src/main.ts and all it uses), CommonJS, loaded by main.cjs
//   envd.cjs.cache    V8's code cache for envd.cjs, made by the node that ran this build
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const here = import.meta.dirname;
const dist = join(here, 'dist');
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
const common = { bundle: true, platform: 'node', target: 'node20', sourcemap: true, logLevel: 'warning' };

await build({
  ...common,
  entryPoints: { index: join(here, 'src/index.ts') },
  outdir: dist,
  format: 'esm',
});

await build({
  ...common,
  entryPoints: { envd: join(here, 'src/main.ts'), main: join(here, 'src/launcher.ts') },
  outdir: dist,
  outExtension: { '.js': '.cjs' },
  format: 'cjs',
  external: ['node-pty'],
  define: {
    __ENVD_VERSION__: JSON.stringify(pkg.version),
    // The sources are ES modules; in the CommonJS bundle a module's file is __filename.
    'import.meta.dirname': '__dirname',
    'import.meta.url': 'importMetaUrl',
  },
  inject: [join(here, 'src/cjs-import-meta.ts')],
});
chmodSync(join(dist, 'main.cjs'), 0o755);
rmSync(join(dist, 'main.js'), { force: true });
rmSync(join(dist, 'main.js.map'), { force: true });

cpSync(join(here, 'build/Release/envd_native.node'), join(dist, 'envd_native.node'));

const ptyDir = dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
const ptyOut = join(dist, 'node_modules/node-pty');
rmSync(ptyOut, { recursive: true, force: true });
mkdirSync(join(ptyOut, 'build/Release'), { recursive: true });
cpSync(join(ptyDir, 'package.json'), join(ptyOut, 'package.json'));
cpSync(join(ptyDir, 'lib'), join(ptyOut, 'lib'), { recursive: true, filter: (src) => !src.endsWith('.test.js') && !src.endsWith('.map') });
cpSync(join(ptyDir, 'build/Release/pty.node'), join(ptyOut, 'build/Release/pty.node'));

// Last, once dist/ is complete: the cache is made by loading envd.cjs as
// main.cjs does, with the options envd always runs with (V8 refuses a cache
// made with others) and none from NODE_OPTIONS, which a sandbox's envd never
// has.
const { envdNodeFlags } = await import(join(dist, 'index.js'));
const env = { ...process.env };
delete env.NODE_OPTIONS;
execFileSync(process.execPath, [...envdNodeFlags, join(dist, 'main.cjs'), '--write-code-cache', join(dist, 'envd.cjs.cache')], { stdio: 'inherit', env });
