// The `metadata` filter of the sandbox lists.
import { badRequest } from './errors.js';

/**
 * The filter is a query string (`k=v&k2=v2`) whose keys and values are
 * themselves URL-encoded, sent as one query parameter: decode the parameter
 * (done by the HTTP layer), parse it, decode each key and value.
 */
export function parseMetadataFilter(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined || raw === '') return undefined;
  const out: Record<string, string> = {};
  try {
    for (const [k, v] of new URLSearchParams(raw)) out[decodeURIComponent(k)] = decodeURIComponent(v);
  } catch {
    throw badRequest(`metadata filter '${raw}' is not a URL-encoded query string`);
  }
  return out;
}
