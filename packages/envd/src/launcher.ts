#!/usr/bin/env node
// envd's entry point (dist/sandbox/envd/main.cjs). It loads envd itself
// (envd.cjs beside it, the bundle of main.ts) with the code cache the build
// made for it, and starts it.
//
// Compiling the 480 KB bundle and running its top level (protobuf-es builds
// the descriptors of every service there) was a third of envd's start, and
// envd's start is most of a cold sandbox's. V8 can skip the compiling, for
// the functions that ran when the cache was made, if it is handed that
// cache with the source. Node 20 has no cache of its own for user code, so
// this is done here with vm.Script, for a CommonJS wrapper like the one
// `require` makes: ESM modules take no cached data, and their loader costs
// more at start as well.
//
// V8 checks that a cache matches the source, its own version and the
// options that affect code (`envdNodeFlags`: the cache is made with them);
// a cache that does not match is refused and the bundle compiled from its
// source, only slower. The cache is made by the build, by the node of
// dist/sandbox, and lives beside the bundle, which sandboxes see read-only.
//
// A cache holds the functions that had been compiled when it was made. Made
// right after loading, that is the bundle's top level only; what envd runs
// to start listening and to serve a new sandbox's first requests (/init, its
// first command) was compiled at every start, on the way to that command.
// So the build starts envd with the cache's maker, sends it those requests
// (build.mjs) and has the cache written afterwards.
//
// Node's user-land startup snapshot (--build-snapshot) is not used either.
// Measured with envd's node on the 2-core PVM machine of the benchmarks,
// where each page's first touch is slow, exec to first output took ~90 ms
// plain, ~131 ms from an empty snapshot (its 5.4 MB blob holds V8's code for
// Node's own modules, read into fresh memory) and ~98 ms from one built
// without that code; a snapshot of the protobuf registry and models started
// no sooner (~125 ms) than building them at start did (~124 ms). And Node 22
// cannot snapshot node:http (its parser binding aborts the build), which
// envd and connect-node load at their top level.
//
//   node main.cjs [envd's options]                            start envd
//   node main.cjs --write-code-cache FILE                     load the bundle, write its cache to FILE
//   node main.cjs --write-code-cache FILE [envd's options]    also start envd with those options; write
//                                                             the cache once standard input ends (the build)
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Script } from 'node:vm';
import type { CodeCacheStatus, main } from './main.js';

const bundle = join(__dirname, 'envd.cjs');
const cacheFile = join(__dirname, 'envd.cjs.cache');

/** Compiles and runs the bundle (`cachedData` offered to V8 when given); returns its exports and its script. */
function load(cachedData: Buffer | undefined): { envd: { main: typeof main }; script: Script } {
  const source = readFileSync(bundle, 'utf8');
  // The parameters are those of a CommonJS module; the bundle's require()
  // of node-pty resolves from dist/, where this file is too.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: bundle, cachedData });
  const module = { exports: {} as { main: typeof main } };
  (script.runInThisContext() as (...args: unknown[]) => void)(module.exports, require, module, bundle, __dirname);
  return { envd: module.exports, script };
}

/** The cache, or why there is none to offer: envd starts either way. */
function readCache(): { data: Buffer } | { none: 'none' | 'unreadable'; error?: string } {
  try {
    return { data: readFileSync(cacheFile) };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code === 'ENOENT' ? { none: 'none' } : { none: 'unreadable', error: e.message };
  }
}

if (process.argv[2] === '--write-code-cache') {
  const out = process.argv[3];
  if (!out) {
    process.stderr.write('envd: --write-code-cache needs the file to write\n');
    process.exit(2);
  }
  const { envd, script } = load(undefined);
  const write = () => {
    writeFileSync(`${out}.tmp`, script.createCachedData());
    renameSync(`${out}.tmp`, out);
    process.exit(0);
  };
  if (process.argv.length === 4) write();
  else {
    // envd reads its options from process.argv.
    process.argv.splice(2, 2);
    envd.main({ codeCache: 'none' });
    process.stdin.on('end', write).resume();
  }
} else {
  const cache = readCache();
  const { envd, script } = load('data' in cache ? cache.data : undefined);
  // V8 sets cachedDataRejected (to false) only when it was handed a cache and used it.
  const codeCache: CodeCacheStatus = 'data' in cache ? (script.cachedDataRejected === false ? 'accepted' : 'rejected') : cache.none;
  envd.main({ codeCache, codeCacheError: 'error' in cache ? cache.error : undefined });
}
