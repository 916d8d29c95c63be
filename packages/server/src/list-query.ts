// Parsing of the list query: the metadata filter and the page cursor.
import { badRequest } from './errors.js';

/**
 * The `metadata` filter is a query string (`k=v&k2=v2`) whose keys and
 * values are themselves URL-encoded, sent as one query parameter: decode the
 * parameter (done by the HTTP layer), parse it, decode each key and value.
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

export interface Cursor {
  startedAt: number;
  id: string;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.startedAt, c.id])).toString('base64url');
}

export function decodeCursor(token: string | undefined): Cursor | undefined {
  if (token === undefined || token === '') return undefined;
  try {
    const [startedAt, id] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof startedAt === 'number' && typeof id === 'string') return { startedAt, id };
  } catch {
    // fall through
  }
  throw badRequest(`nextToken '${token}' is not a cursor this server issued`);
}
