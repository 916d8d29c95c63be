// What the runtime needs to put envd into a sandbox: where the self-contained
// build is and which version it reports.
import { join, resolve } from 'node:path';

export { envdVersion } from './version.js';
export { fileSignature, type FileOperation } from './auth.js';

/**
 * The directory holding envd's bundle (`main.js`), its native addons and the
 * node modules they need. Mounted read-only into every sandbox.
 */
export const envdDistDir: string = resolve(import.meta.dirname, '..', 'dist');

/** The entry point inside `envdDistDir`. */
export const envdMain: string = join(envdDistDir, 'main.js');

/** The port clients address envd on, as E2B's protocol fixes it. */
export const ENVD_PORT = 49983;
