// What the runtime needs to put envd into a sandbox: where the self-contained
// build is and which version it reports.
import { join, resolve } from 'node:path';

export { envdVersion } from './version.js';
export { fileSignature, type FileOperation } from './auth.js';

/**
 * The directory holding envd's bundle (`main.cjs` and what it loads), its native addons and the
 * node modules they need. Mounted read-only into every sandbox.
 */
export const envdDistDir: string = resolve(import.meta.dirname, '..', 'dist');

/** The entry point's name inside `envdDistDir`: `node <envdNodeFlags> <it> [envd's options]` starts envd. */
export const envdEntry = 'main.cjs';

/** The entry point, on this machine. */
export const envdMain: string = join(envdDistDir, envdEntry);

/**
 * The options of the `node` that runs envd, wherever it runs.
 *
 * - `--max-old-space-size=96`: a small heap keeps envd's footprint low; it
 *   never holds file data.
 * - `--initial-old-space-size=32`: without it, V8 starts a full incremental
 *   mark of this small heap every few MiB of file transfer (each socket read
 *   is a fresh 64 KiB buffer outside the heap), and marks that free nothing
 *   were most of envd's CPU for an upload: 2.0-2.8 ms of CPU per 1 MiB POST
 *   before, 1.0-1.5 ms with it. Memory under load stays the same (about
 *   100 MB resident either way while uploading), and an idle envd commits no
 *   more than before.
 */
export const envdNodeFlags: readonly string[] = ['--max-old-space-size=96', '--initial-old-space-size=32'];


export { ENVD_PORT } from '@paddock/protocol';
