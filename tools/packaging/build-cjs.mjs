#!/usr/bin/env node
// The CommonJS half of a dual package, run after `tsc -b` made the ESM half
// (dist/*.js and the declarations). Each source file becomes one CommonJS
// file in dist/cjs, not bundled, so both halves come from one source tree
// file for file; dist/cjs/package.json says `commonjs`, so Node, bundlers and
// TypeScript read the copied declarations there as CommonJS ones.
//
// esbuild rather than a second tsc pass: tsc emits CommonJS only from a
// package it believes to be CommonJS (its `type` field), or with a module
// resolution that ignores `exports` maps, which the imports of
// `@paddock/models/control` and the like need.
//
//   node tools/packaging/build-cjs.mjs      (in the package's directory)
import { transform } from 'esbuild';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';

const pkgDir = process.cwd();
const src = join(pkgDir, 'src');
const dist = join(pkgDir, 'dist');
const out = join(dist, 'cjs');

function filesUnder(dir, keep) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && keep(e.name))
    .map((e) => join(e.parentPath, e.name));
}

rmSync(out, { recursive: true, force: true });
// esbuild's transform, one file at a time, rather than its build: the build
// knows the package is `type: module` and gives a default import Node's ESM
// meaning (the whole `module.exports`), which is wrong once the importer is
// itself CommonJS (openapi-fetch's `exports.default`, say).
let failed = false;
for (const file of filesUnder(src, (n) => n.endsWith('.ts') && !n.endsWith('.d.ts'))) {
  const target = join(out, relative(src, file)).replace(/\.ts$/, '.js');
  mkdirSync(dirname(target), { recursive: true });
  const result = await transform(readFileSync(file, 'utf8'), {
    loader: 'ts',
    format: 'cjs',
    platform: 'neutral',
    target: 'es2022',
    sourcemap: 'external',
    // The sources ship in the tarball beside dist.
    sourcesContent: false,
    sourcefile: relative(dirname(target), file),
    logLevel: 'silent',
  });
  // A warning here (`import.meta` in CommonJS, say) would be a broken module at run time.
  for (const w of result.warnings) {
    console.error(`${file}:${w.location?.line ?? ''}: ${w.text}`);
    failed = true;
  }
  const name = basename(target);
  writeFileSync(target, `${result.code}//# sourceMappingURL=${name}.map\n`);
  writeFileSync(`${target}.map`, result.map);
}
if (failed) process.exit(1);
writeFileSync(join(out, 'package.json'), '{\n  "type": "commonjs"\n}\n');

// The ESM declarations serve CommonJS as they are; only their maps' paths move one level down.
for (const file of filesUnder(dist, (n) => n.endsWith('.d.ts') || n.endsWith('.d.ts.map'))) {
  if (file.startsWith(out + '/')) continue;
  const target = join(out, relative(dist, file));
  mkdirSync(dirname(target), { recursive: true });
  let text = readFileSync(file, 'utf8');
  if (file.endsWith('.map')) {
    const map = JSON.parse(text);
    map.sources = map.sources.map((s) => relative(dirname(target), resolve(dirname(file), s)));
    text = JSON.stringify(map);
  }
  writeFileSync(target, text);
}
