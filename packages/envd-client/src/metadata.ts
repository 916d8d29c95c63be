import { MAX_METADATA_BYTES, MAX_METADATA_KEY_BYTES, metadataProblem } from '@paddock/protocol';
import { EnvdArgumentError } from './errors.js';

export { MAX_METADATA_BYTES, MAX_METADATA_KEY_BYTES };

/**
 * The `X-Metadata-{key}` headers of an upload, after the checks envd would
 * make, so that bad metadata fails here with a clear message instead of as
 * a 400 after the whole body was sent.
 */
export function metadataHeaders(metadata: Readonly<Record<string, string>> | undefined): Record<string, string> {
  if (!metadata) return {};
  const problem = metadataProblem(Object.entries(metadata));
  if (problem) throw new EnvdArgumentError('metadata', problem);
  return Object.fromEntries(Object.entries(metadata).map(([key, value]) => [`X-Metadata-${key}`, value]));
}
