// Test data that need not be held in memory: the same pseudo-random bytes
// for the same seed, produced a chunk at a time, and the digest of a stream.
// Used by the envd client's and the SDK's tests of large transfers.
import { createHash } from 'node:crypto';

/** `total` bytes of a linear congruential sequence; the bytes depend on `seed` only, not on `chunkSize`. */
export async function* generatedBytes(total, chunkSize = 64 * 1024, seed = 1) {
  let state = seed;
  for (let sent = 0; sent < total; sent += chunkSize) {
    const chunk = new Uint8Array(Math.min(chunkSize, total - sent));
    for (let i = 0; i < chunk.length; i++) {
      state = (state * 1103515245 + 12345) >>> 0;
      chunk[i] = state >>> 24;
    }
    yield chunk;
  }
}

/** SHA-256 (hex) and size of everything a stream yields. */
export async function sha256Of(chunks) {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of chunks) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { sha256: hash.digest('hex'), size };
}
