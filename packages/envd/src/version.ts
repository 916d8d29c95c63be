// envd's version, reported to clients as `envdVersion`. Clients of E2B's
// protocol enable features by it (the newest gate is 0.6.4), so it must stay
// a plain semver without a pre-release suffix.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

declare const __ENVD_VERSION__: string | undefined;

export const envdVersion: string =
  typeof __ENVD_VERSION__ === 'string'
    ? __ENVD_VERSION__
    : (JSON.parse(readFileSync(join(import.meta.dirname, '../package.json'), 'utf8')) as { version: string }).version;
