// What the runtime needs to put envd into a sandbox: the self-contained
// directory the build makes, the command that starts envd from it, and the
// version envd reports.
import { readFileSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';

export { envdVersion } from './version.js';
export { fileSignature, type FileOperation } from './auth.js';

/**
 * The directory the build makes (dist/sandbox): envd's own node, the shared
 * libraries and dynamic loader that node and envd's native addons need,
 * and envd's bundle. It needs nothing of the image it runs in, so it is
 * mounted read-only at `envdMountPoint` in every sandbox, whatever its image.
 *
 *   bin/node
 *   lib/        the loader (ld-linux-*.so.*) and the libraries, as the host's ldd resolved them
 *   envd/       main.cjs (envd's entry point) and what it loads; tools.cjs (the build tools)
 */
export const envdSandboxDir: string = resolve(import.meta.dirname, '..', 'dist', 'sandbox');

/** Where `envdSandboxDir` is mounted inside a sandbox. */
export const envdMountPoint = '/.paddock';

/** envd's entry point on this machine: `node <envdNodeFlags> <it>` runs envd on the host (tests, benchmarks). */
export const envdMain: string = join(envdSandboxDir, 'envd', 'main.cjs');

/**
 * The options of the `node` that runs envd, wherever it runs: none, and
 * that is deliberate. Node's binary carries a code cache of its own
 * modules (node:http, net, child_process, ...), which V8 takes only when
 * its flags are those the binary was built with; any V8 option on the
 * command line (`--max-old-space-size=96` and `--initial-old-space-size=32`
 * were here) makes V8 refuse it, and every one of those modules is
 * compiled from source at each start. Measured on the 2-core machine of the
 * benchmarks: loading them took 21-24 ms with either option against 7-8 ms
 * without, and envd was ready after ~118 ms against ~77 ms; a cold create
 * and its first command took 181 and 196 ms in two runs, against 201
 * before. envd's heap is then bounded by node's own default, taken from the
 * sandbox's memory limit (259 MiB of a 512 MiB sandbox); an idle envd's
 * memory, and the upload and download rates, stayed within the benchmarks'
 * noise.
 */
export const envdNodeFlags: readonly string[] = [];

/** What the build records about the sandbox directory (dist/sandbox.json). */
interface SandboxManifest {
  /** The dynamic loader's file name in lib/. */
  loader: string;
  /** The version of the node in bin/ (`v22.23.3`). */
  node?: string;
}

let manifest: SandboxManifest | undefined;

function sandboxManifest(): SandboxManifest {
  if (!manifest) {
    const file = resolve(envdSandboxDir, '..', 'sandbox.json');
    try {
      manifest = JSON.parse(readFileSync(file, 'utf8')) as SandboxManifest;
    } catch (err) {
      throw new Error(`envd's sandbox directory is not built (${(err as Error).message}); run the envd build`, { cause: err });
    }
  }
  return manifest;
}

export interface EnvdCommandOptions {
  /**
   * Where the sandbox directory is, as the process that runs the command
   * sees it: `envdMountPoint` (the default) inside a sandbox,
   * `envdSandboxDir` to run the same envd on the host.
   */
  root?: string;
  /** envd's own options: `--listen-fd 3`, `--default-user user`, `--env NAME=VALUE` (the image's environment)... */
  args?: readonly string[];
}

/**
 * The start of every command that runs the sandbox directory's node: its
 * own dynamic loader, told where the libraries are on its command line
 * (`--library-path`, and `--inhibit-cache` so that it does not read the
 * image's /etc/ld.so.cache), then node. Nothing of the image's libc is
 * used, and no LD_* variable is set that the processes node starts would
 * inherit. In that node, process.execPath (/proc/self/exe) is then the
 * loader, not node: what it runs never starts node itself, and could not
 * without this command.
 */
function nodeCommand(root: string, nodeFlags: readonly string[], script: string, args: readonly string[]): string[] {
  const at = (...parts: string[]) => posix.join(root, ...parts);
  return [at('lib', sandboxManifest().loader), '--library-path', at('lib'), '--inhibit-cache', at('bin', 'node'), ...nodeFlags, at(script), ...args];
}

/**
 * The argv that starts envd from the sandbox directory (see `nodeCommand`).
 * Nothing from the environment reaches envd's node either, so the runtime
 * starts it with an empty environment and hands the image's to envd as
 * `--env` options instead (an image's LD_PRELOAD or NODE_OPTIONS would
 * otherwise act on envd).
 */
export function envdCommand({ root = envdMountPoint, args = [] }: EnvdCommandOptions = {}): string[] {
  return nodeCommand(root, envdNodeFlags, 'envd/main.cjs', args);
}

/**
 * The argv that runs one of envd's build tools from the sandbox directory,
 * in a build container (`root` as for `envdCommand`), whatever its image:
 *
 *   copy --archive FILE --source PATH --dest PATH [--workdir DIR] [--user NAME] [--owner USER[:GROUP]] [--mode OCTAL]
 *       the COPY step: unpacks the archive of the build context and places
 *       `source` of it at `dest`; exits 1 with one line on stderr when it
 *       cannot, having changed nothing when the archive is refused
 *   user NAME
 *       the USER step: prints `uid gid home` of the user, created first
 *       (passwd, group, shadow, home) when the image has none of that name
 *
 * A value that may start with '-' (a relative dest) goes as `--dest=VALUE`.
 * Run it as root with an empty environment, as envd is: the tools need no
 * variable, and an image's NODE_OPTIONS or LD_PRELOAD would act on them.
 * Its node runs without options, as envd's does (`envdNodeFlags`).
 */
export function envdToolCommand(tool: 'copy' | 'user' | 'step-process', args: readonly string[], { root = envdMountPoint }: { root?: string } = {}): string[] {
  return nodeCommand(root, [], TOOLS_SCRIPT, [tool, ...args]);
}

const TOOLS_SCRIPT = 'envd/tools.cjs';

/**
 * The build tools' script in the sandbox directory at `root`, for a worker
 * thread of the host's own node (`new Worker(script, { workerData: { serve:
 * true }, env: {} })`), which then takes copies as messages: `{ tool:
 * 'copy', args }` (the copy tool's arguments, as for `envdToolCommand`) is
 * answered `{}` when done, or `{ error }` with the line the tool prints;
 * `{ tool: 'step-process', args }` is answered `{ value }` with what the
 * tool prints (parsed).
 */
export function envdToolsScript(root: string): string {
  return posix.join(root, TOOLS_SCRIPT);
}

export { ENVD_PORT } from '@paddock/protocol';
