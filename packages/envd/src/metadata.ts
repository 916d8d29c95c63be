// User metadata of uploaded files, kept as extended attributes
// `user.e2b.{key}` so that it travels with the file.
import { native } from './native.js';
import { EnvdRouteError } from './errors.js';

const PREFIX = 'user.e2b.';
const HEADER_PREFIX = 'x-metadata-';
export const MAX_KEY_BYTES = 246;
export const MAX_METADATA_BYTES = 4096;
const PRINTABLE = /^[\x20-\x7e]*$/;

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
 * key when the metadata breaks the limits.
 */
export function metadataFromHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  let total = 0;
  let any = false;
  for (const [name, raw] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!lower.startsWith(HEADER_PREFIX) || raw === undefined) continue;
    const key = lower.slice(HEADER_PREFIX.length);
    const value = Array.isArray(raw) ? raw.join(', ') : raw;
    if (!key) throw new EnvdRouteError(400, `metadata header '${name}' has an empty key`);
    if (!PRINTABLE.test(key) || !PRINTABLE.test(value)) {
      throw new EnvdRouteError(400, `metadata '${key}' must be printable ASCII`);
    }
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) {
      throw new EnvdRouteError(400, `metadata key '${key.slice(0, 32)}...' is longer than ${MAX_KEY_BYTES} bytes`);
    }
    total += Buffer.byteLength(key) + Buffer.byteLength(value);
    out[key] = value;
    any = true;
  }
  if (total > MAX_METADATA_BYTES) {
    throw new EnvdRouteError(400, `metadata is ${total} bytes, more than the ${MAX_METADATA_BYTES} allowed`);
  }
  return any ? out : undefined;
}

/** Replaces the file's metadata with `metadata`. */
export function writeMetadata(path: string, metadata: Record<string, string>): void {
  for (const key of Object.keys(native.getXattrs(path, PREFIX))) native.removeXattr(path, PREFIX + key);
  for (const [key, value] of Object.entries(metadata)) native.setXattr(path, PREFIX + key, value);
}
