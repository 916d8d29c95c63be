// The code-interpreter-v1 template for tests and the bench, built from its
// definition (packages/code-interpreter/e2b.Dockerfile) by `paddock template
// build`, as a user builds it.
//
// Its apt step takes minutes, so the servers that need it keep their data in
// one directory beside the host-wide test cache (PADDOCK_TEST_CACHE, default
// /var/tmp/paddock-test-cache, whose mode lets no sandbox root pass it; the
// directory is that name with `-code-interpreter`): the server's own build
// cache then finds every
// unchanged step there, and a later run builds only what changed (nothing:
// a few seconds for the ready check). One server uses it at a time; a run
// that finds it in use gets a directory of its own and builds from scratch.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testCacheDir } from './base-image.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const CODE_INTERPRETER_CONTEXT = join(root, 'packages/code-interpreter');
export const CODE_INTERPRETER_TEMPLATE = 'code-interpreter-v1';
/** Memory of its sandboxes and build steps, MiB: dpkg and the kernels need more than a sandbox's default. */
export const CODE_INTERPRETER_MEMORY_MB = 2048;

/**
 * The API key of servers on the kept data directory: the store keeps the key
 * its first server was given, so every user of the directory (the compat
 * suite, the bench) gives the same one (the compat harness's).
 */
export const CODE_INTERPRETER_API_KEY = 'e2b_c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';

/** The server data directory kept for code-interpreter builds, or a new one when another process holds it. */
export function codeInterpreterHome() {
  const kept = `${testCacheDir()}-code-interpreter`;
  mkdirSync(kept, { recursive: true, mode: 0o711 });
  let holder;
  try {
    holder = Number(readFileSync(join(kept, 'server.pid'), 'utf8').trim());
  } catch {
    return { home: kept, kept: true };
  }
  let alive;
  try {
    process.kill(holder, 0);
    alive = holder !== process.pid;
  } catch {
    alive = false;
  }
  return alive ? { home: mkdtempSync(join(tmpdir(), 'paddock-ci-home-')), kept: false } : { home: kept, kept: true };
}

/**
 * Runs `paddock template build packages/code-interpreter --name
 * code-interpreter-v1` against a server; its output goes to `onLine`.
 * Resolves with how long it took, ms; rejects with the output's end when it fails.
 */
export function buildCodeInterpreter({ apiUrl, apiKey, onLine = () => {} }) {
  const started = Date.now();
  const cli = join(root, 'packages/cli/dist/main.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'template', 'build', CODE_INTERPRETER_CONTEXT, '--name', CODE_INTERPRETER_TEMPLATE, '--memory', String(CODE_INTERPRETER_MEMORY_MB)], {
      env: { ...process.env, PADDOCK_API_URL: apiUrl, PADDOCK_API_KEY: apiKey, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const tail = [];
    const take = (chunk) => {
      for (const line of chunk.toString().split('\n')) {
        if (!line) continue;
        onLine(line);
        tail.push(line);
        if (tail.length > 30) tail.shift();
      }
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(Date.now() - started);
      else reject(new Error(`paddock template build exited with ${code}:\n${tail.join('\n')}`));
    });
  });
}
