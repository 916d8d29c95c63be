// User metadata of an uploaded file: one `X-Metadata-{key}: value` header
// per entry. envd keeps each entry as the extended attribute
// `user.e2b.{key}`, whose name may be 255 bytes long; that, and one
// attribute block per file, set the limits.

export const METADATA_HEADER_PREFIX = 'x-metadata-';
/** Longest key, in bytes. */
export const MAX_METADATA_KEY_BYTES = 246;
/** Most bytes of all keys and values of one file together. */
export const MAX_METADATA_BYTES = 4096;

// A key travels in a header name, so it is an HTTP token; a value is printable ASCII.
const KEY = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
const VALUE = /^[\x20-\x7e]*$/;

/**
 * What is wrong with these metadata entries, in words that name the entry,
 * or undefined when they are acceptable. Both ends check: a client before
 * it sends the body, envd before it writes the file.
 */
export function metadataProblem(entries: Iterable<readonly [string, string]>): string | undefined {
  let total = 0;
  for (const [key, value] of entries) {
    if (!KEY.test(key)) {
      return `metadata key ${JSON.stringify(key)} must be non-empty printable ASCII without spaces or separators ()<>@,;:\\"/[]?={}`;
    }
    // Both are ASCII once they pass these checks, so length is bytes.
    if (key.length > MAX_METADATA_KEY_BYTES) {
      return `metadata key ${JSON.stringify(key.slice(0, 20) + '…')} is ${key.length} bytes; the limit is ${MAX_METADATA_KEY_BYTES}`;
    }
    if (!VALUE.test(value)) return `metadata value of ${JSON.stringify(key)} must be printable ASCII`;
    total += key.length + value.length;
  }
  if (total > MAX_METADATA_BYTES) return `metadata is ${total} bytes in all; the limit is ${MAX_METADATA_BYTES}`;
  return undefined;
}
