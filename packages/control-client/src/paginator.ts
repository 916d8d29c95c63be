/** One page of a listing and the cursor of the next one. */
export interface Page<T> {
  /** Items of this page. */
  items: T[];
  /** Value of `X-Next-Token`; undefined on the last page. */
  nextToken: string | undefined;
}

/** Fetches the page at a cursor (the first page when undefined). */
export type PageFetcher<T> = (nextToken: string | undefined) => Promise<Page<T>>;

/**
 * Walks a listing that is paged with `X-Next-Token`. Iterate it with
 * `for await` to get items, use `pages()` to get whole pages, or drive it by
 * hand with `hasNext` / `nextItems()`; all three share one cursor.
 */
export class Paginator<T> implements AsyncIterable<T> {
  readonly #fetchPage: PageFetcher<T>;
  #started = false;
  /** Cursor of the page `nextItems()` fetches; undefined before the first page and after the last. */
  nextToken: string | undefined;

  /** `nextToken` resumes a listing from a cursor saved earlier. */
  constructor(fetchPage: PageFetcher<T>, nextToken?: string) {
    this.#fetchPage = fetchPage;
    this.nextToken = nextToken;
    this.#started = nextToken !== undefined;
  }

  /** Whether another page can be fetched. */
  get hasNext(): boolean {
    return !this.#started || this.nextToken !== undefined;
  }

  /** Fetches the next page and returns its items. */
  async nextItems(): Promise<T[]> {
    if (!this.hasNext) throw new Error('No more pages: the previous page had no X-Next-Token');
    const page = await this.#fetchPage(this.nextToken);
    this.#started = true;
    // An empty token means the same as none.
    this.nextToken = page.nextToken || undefined;
    return page.items;
  }

  /** Fetches the remaining pages one by one. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    while (this.hasNext) {
      const items = await this.nextItems();
      yield { items, nextToken: this.nextToken };
    }
  }

  /** Every remaining item, fetching pages as needed. */
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.items;
  }
}
