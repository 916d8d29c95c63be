// envd reports its version on create and connect; a feature that an older
// envd lacks fails here with a clear TemplateError instead of an obscure
// answer from the sandbox.
import { TemplateError } from './errors.js';

/** Oldest envd the SDK works with: from 0.4.0 on, envd picks the default user itself. */
export const MIN_ENVD_VERSION = '0.4.0';

/** First envd version of each feature the SDK gates. */
export const ENVD_FEATURES = {
  closeStdin: '0.5.2',
  octetStreamUpload: '0.5.7',
  fileMetadata: '0.6.2',
  watchEntryInfo: '0.6.3',
  watchNetworkMounts: '0.6.4',
} as const;

type Triple = [number, number, number];

/** `major.minor.patch`; a build suffix is ignored. Undefined when it is not a version. */
function parse(version: string): { release: Triple; prerelease: boolean } | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.exec(version.trim());
  if (!match) return undefined;
  return { release: [Number(match[1]), Number(match[2]), Number(match[3])], prerelease: match[4] !== undefined };
}

/**
 * Whether `version` is at least `minimum`. A pre-release counts as older than
 * its release. A version that cannot be read counts as new enough: a custom
 * envd build is not refused for its name.
 */
export function atLeast(version: string, minimum: string): boolean {
  const v = parse(version);
  const m = parse(minimum);
  if (!v || !m) return true;
  for (let i = 0; i < 3; i++) {
    const a = v.release[i] ?? 0;
    const b = m.release[i] ?? 0;
    if (a !== b) return a > b;
  }
  return !v.prerelease || m.prerelease;
}

/** Throws when the sandbox's envd is older than `minimum`. */
export function requireEnvd(version: string, minimum: string, what: string): void {
  if (!atLeast(version, minimum)) {
    throw new TemplateError(
      `${what} needs envd ${minimum} or newer, but this sandbox runs envd ${version}; rebuild its template with a newer envd`,
    );
  }
}
