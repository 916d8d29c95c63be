import { EnvdArgumentError } from './errors.js';

/** Longest key: envd stores each entry as the extended attribute `user.e2b.{key}`, whose name may be 255 bytes. */
export const MAX_METADATA_KEY_BYTES = 246;
/** Most bytes of all keys and values of one file together. */
export const MAX_METADATA_BYTES = 4096;

// A key travels in a header name, so it must be an HTTP token; a value must be printable ASCII.
const KEY = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
const VALUE = /^[\x20-\x7e]*$/;

/**
 * The `X-Metadata-{key}` headers of an upload, after the checks envd would
 * make, so that bad metadata fails here with a clear message instead of as
 * a 400 after the whole body was sent.
 */
export function metadataHeaders(metadata: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!metadata) return headers;
  let total = 0;
  for (const [key, value] of Object.entries(metadata)) {
    if (!KEY.test(key)) {
      throw new EnvdArgumentError(
        'metadata',
        `metadata key ${JSON.stringify(key)} must be non-empty printable ASCII without spaces or separators ()<>@,;:\\"/[]?={}`,
      );
    }
    if (key.length > MAX_METADATA_KEY_BYTES) {
      throw new EnvdArgumentError('metadata', `metadata key ${JSON.stringify(key.slice(0, 20) + '…')} is ${key.length} bytes; the limit is ${MAX_METADATA_KEY_BYTES}`);
    }
    if (!VALUE.test(value)) {
      throw new EnvdArgumentError('metadata', `metadata value of ${JSON.stringify(key)} must be printable ASCII`);
    }
    total += key.length + value.length;
    headers[`X-Metadata-${key}`] = value;
  }
  if (total > MAX_METADATA_BYTES) {
    throw new EnvdArgumentError('metadata', `metadata is ${total} bytes in all; the limit is ${MAX_METADATA_BYTES}`);
  }
  return headers;
}
