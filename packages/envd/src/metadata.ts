// User metadata of uploaded files, kept as extended attributes
// `user.e2b.{key}` so that it travels with the file.
import { native } from './native.js';
import { EnvdRouteError } from './errors.js';
import { METADATA_HEADER_PREFIX, metadataProblem } from '@paddock/protocol';

const PREFIX = 'user.e2b.';

export function readMetadata(path: string): Record<string, string> {
  try {
    return native.getXattrs(path, PREFIX);
  } catch {
    return {};
  }
}

/**
 * Metadata from `X-Metadata-{key}` request headers (keys lowercased), or
 * undefined when the request has none. Throws a 400 naming the offending
 * entry when the metadata breaks the protocol's limits.
 */
export function metadataFromHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> | undefined {
  const entries: [string, string][] = [];
  for (const [name, raw] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!lower.startsWith(METADATA_HEADER_PREFIX) || raw === undefined) continue;
    entries.push([lower.slice(METADATA_HEADER_PREFIX.length), Array.isArray(raw) ? raw.join(', ') : raw]);
  }
  if (entries.length === 0) return undefined;
  const problem = metadataProblem(entries);
  if (problem) throw new EnvdRouteError(400, problem);
  return Object.fromEntries(entries);
}

/** Replaces the file's metadata with `metadata`. */
export function writeMetadata(path: string, metadata: Record<string, string>): void {
  for (const key of Object.keys(native.getXattrs(path, PREFIX))) native.removeXattr(path, PREFIX + key);
  for (const [key, value] of Object.entries(metadata)) native.setXattr(path, PREFIX + key, value);
}
