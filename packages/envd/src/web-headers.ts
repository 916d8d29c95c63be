// Injected by build.mjs into envd's bundle for every free `Headers`: Connect
// turns each request's headers into a WHATWG Headers and back.
//
// Node's own class is a lazy global whose first use loads all of Node's
// bundled fetch (with http2, tls, worker_threads, web streams and more):
// ~80 ms of the first command of every new sandbox on a 2-core host. The
// undici package's class alone still loaded node:assert, zlib, perf_hooks,
// worker_threads and a third of undici at every envd start: the largest
// part of loading the bundle, before a new sandbox could answer. What
// Connect needs of the class is a case-insensitive list of name/value
// pairs, so envd has its own: the Headers interface of the Fetch standard
// for a header list without guard (fetch.spec.whatwg.org, "Headers class"),
// checked against Node's in test/web-headers.test.ts. Only envd's bundle
// sees it; the global stays Node's.

/** A header name: an HTTP token (RFC 9110, 5.6.2). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** HTTP whitespace around a value, removed (the standard's "normalize"). */
const OUTER_WHITESPACE = /^[\t\n\r ]+|[\t\n\r ]+$/g;
/** What a normalized value may not hold. */
const FORBIDDEN_IN_VALUE = /[\0\r\n]/;

function headerName(name: string): string {
  const s = String(name);
  if (!TOKEN.test(s)) throw new TypeError(`Headers: '${s}' is not a valid header name`);
  return s.toLowerCase();
}

function headerValue(value: string): string {
  const s = String(value).replace(OUTER_WHITESPACE, '');
  if (FORBIDDEN_IN_VALUE.test(s)) throw new TypeError(`Headers: the value of a header may not contain NUL, CR or LF`);
  return s;
}

type HeadersInit = ConstructorParameters<typeof globalThis.Headers>[0];

class EnvdHeaders {
  /** Lower-cased name to its values, in the order they were added. */
  readonly #list = new Map<string, string[]>();

  constructor(init?: HeadersInit) {
    if (init === undefined || init === null) return;
    if (typeof init !== 'object') throw new TypeError('Headers: init must be an object, a sequence of pairs or a Headers');
    if (Symbol.iterator in init) {
      for (const pair of init as Iterable<Iterable<string>>) {
        const p: string[] = [...pair];
        if (p.length !== 2) throw new TypeError('Headers: each pair of init must have exactly a name and a value');
        this.append(p[0]!, p[1]!);
      }
    } else {
      for (const [name, value] of Object.entries(init as Record<string, unknown>)) this.append(name, String(value));
    }
  }

  append(name: string, value: string): void {
    const key = headerName(name);
    const v = headerValue(value);
    const values = this.#list.get(key);
    if (values) values.push(v);
    else this.#list.set(key, [v]);
  }

  set(name: string, value: string): void {
    this.#list.set(headerName(name), [headerValue(value)]);
  }

  delete(name: string): void {
    this.#list.delete(headerName(name));
  }

  get(name: string): string | null {
    return this.#list.get(headerName(name))?.join(', ') ?? null;
  }

  getSetCookie(): string[] {
    return [...(this.#list.get('set-cookie') ?? [])];
  }

  has(name: string): boolean {
    return this.#list.has(headerName(name));
  }

  /** Sorted by name, values combined, each Set-Cookie on its own (the standard's "sort and combine"). */
  *entries(): IterableIterator<[string, string]> {
    for (const name of [...this.#list.keys()].sort()) {
      const values = this.#list.get(name);
      if (!values) continue;
      if (name === 'set-cookie') for (const v of values) yield [name, v];
      else yield [name, values.join(', ')];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  forEach(callback: (value: string, key: string, parent: EnvdHeaders) => void, thisArg?: unknown): void {
    for (const [name, value] of this.entries()) callback.call(thisArg, value, name, this);
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  get [Symbol.toStringTag](): string {
    return 'Headers';
  }
}

export const Headers = EnvdHeaders as unknown as typeof globalThis.Headers;
