// The one way the control API pages a list: `limit` and `nextToken` in the
// query, the next page's token in the `X-Next-Token` header. A token is the
// position of the last item given (its sort key and id), so a page is read
// from an index, and items added or removed meanwhile shift nothing.
import { badRequest } from './errors.js';
import type { ListWindow, PagePosition } from './store/repositories.js';

/** The spec's default for `limit` (the validator does not fill in defaults). */
export const DEFAULT_PAGE_LIMIT = 100;

export interface Page<T> {
  items: T[];
  /** Absent on the last page. */
  nextToken?: string;
}

// The form of sandbox list tokens issued before this module, so that they stay valid.
export function encodePageToken(p: PagePosition): string {
  return Buffer.from(JSON.stringify([p.key, p.id])).toString('base64url');
}

export function decodePageToken(token: string | undefined): PagePosition | undefined {
  if (token === undefined || token === '') return undefined;
  try {
    const [key, id] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof key === 'number' && typeof id === 'string') return { key, id };
  } catch {
    // not JSON: refused below
  }
  throw badRequest(`nextToken '${token}' is not a cursor this server issued`);
}

/**
 * One page of a list: `read` gets the window after the token's position,
 * one item longer than the page so that a next page shows itself;
 * `positionOf` gives an item's sort key and id.
 */
export async function readPage<T>(
  query: { limit?: number; nextToken?: string },
  read: (window: ListWindow) => Promise<T[]> | T[],
  positionOf: (item: T) => PagePosition,
): Promise<Page<T>> {
  const limit = query.limit ?? DEFAULT_PAGE_LIMIT;
  const after = decodePageToken(query.nextToken);
  const window = await read({ limit: limit + 1, ...(after ? { after } : {}) });
  const items = window.slice(0, limit);
  const last = items.at(-1);
  return window.length > limit && last ? { items, nextToken: encodePageToken(positionOf(last)) } : { items };
}

/** The window of an in-memory list ordered by (key, id), descending or ascending. */
export function windowOf<T>(ordered: T[], w: ListWindow, positionOf: (item: T) => PagePosition, order: 'asc' | 'desc'): T[] {
  const after = w.after;
  const start = after
    ? ordered.findIndex((item) => {
        const p = positionOf(item);
        const cmp = p.key - after.key || (p.id < after.id ? -1 : p.id > after.id ? 1 : 0);
        return order === 'asc' ? cmp > 0 : cmp < 0;
      })
    : 0;
  return start < 0 ? [] : ordered.slice(start, start + w.limit);
}

/** The response header that carries a page's token. */
export function nextTokenHeader(page: { nextToken?: string }): Record<string, string> {
  return page.nextToken ? { 'X-Next-Token': page.nextToken } : {};
}
