// envd's own Headers class (src/web-headers.ts), which Connect uses inside
// envd's bundle, against Node's: the same operations must give the same
// results and the same refusals.
import { Headers as EnvdHeaders } from '../src/web-headers.js';

type AnyHeaders = globalThis.Headers;
type Make = (init?: ConstructorParameters<typeof globalThis.Headers>[0]) => AnyHeaders;

const implementations: Array<[string, Make]> = [
  ['Node', (init) => new globalThis.Headers(init)],
  ['envd', (init) => new EnvdHeaders(init)],
];

/** Everything a Headers shows: its entries, forEach, keys, values, and each name's get/has. */
function view(h: AnyHeaders, names: string[]) {
  const forEach: Array<[string, string]> = [];
  h.forEach((value, key) => forEach.push([key, value]));
  return {
    entries: [...h],
    forEach,
    keys: [...h.keys()],
    values: [...h.values()],
    get: names.map((n) => h.get(n)),
    has: names.map((n) => h.has(n)),
    setCookie: h.getSetCookie(),
    tag: Object.prototype.toString.call(h),
  };
}

/** Runs `ops` on one Headers of each implementation; each result, or the kind of error it threw. */
function both(init: ConstructorParameters<typeof globalThis.Headers>[0], ops: (h: AnyHeaders) => void, names: string[]) {
  return implementations.map(([, make]) => {
    try {
      const h = make(init);
      ops(h);
      return view(h, names);
    } catch (err) {
      return { threw: (err as Error).constructor.name };
    }
  });
}

const NAMES = ['content-type', 'Content-Type', 'x-a', 'set-cookie', 'accept', 'x-empty', 'missing'];

test.each([
  ['empty', undefined, () => undefined],
  ['a record, names in any case', { 'Content-Type': 'application/json', 'X-A': '1' }, () => undefined],
  ['pairs with repeated names, combined in order', [['x-a', '1'], ['X-A', '2'], ['accept', '*/*']], () => undefined],
  ['another Headers', new globalThis.Headers({ accept: 'text/plain' }), () => undefined],
  ['append, set, delete', { accept: 'a' }, (h: AnyHeaders) => (h.append('accept', 'b'), h.set('x-a', 'c'), h.append('x-a', 'd'), h.delete('ACCEPT'))],
  ['values trimmed of outer whitespace, inner kept', undefined, (h: AnyHeaders) => (h.set('x-a', ' \t a  b \r\n'), h.append('x-empty', '   '))],
  ['set-cookie kept apart in iteration, joined by get', undefined, (h: AnyHeaders) => (h.append('Set-Cookie', 'a=1'), h.append('set-cookie', 'b=2; Path=/'), h.append('x-a', 'z'))],
  ['sorted by name', { zeta: '1', alpha: '2', 'Mid-Dle': '3' }, () => undefined],
  ['a name that is not a token', undefined, (h: AnyHeaders) => h.append('bad name', 'x')],
  ['a name with a colon', { 'x:y': '1' }, () => undefined],
  ['an empty name', undefined, (h: AnyHeaders) => h.set('', 'x')],
  ['a value with a newline inside', undefined, (h: AnyHeaders) => h.set('x-a', 'a\nb')],
  ['a value with NUL', undefined, (h: AnyHeaders) => h.append('x-a', 'a\0b')],
  ['get of a name that is not a token', undefined, (h: AnyHeaders) => h.get('bad name')],
  ['a pair of three', [['x-a', '1', '2']] as unknown as string[][], () => undefined],
] as const)('%s: as Node does', (_name, init, ops) => {
  const [node, envd] = both(init as ConstructorParameters<typeof globalThis.Headers>[0], ops as (h: AnyHeaders) => void, NAMES);
  expect(envd).toEqual(node);
});

test('forEach passes thisArg and the Headers itself', () => {
  const h = new EnvdHeaders({ a: '1' });
  const seen: unknown[] = [];
  const self = { marker: true };
  h.forEach(function (this: unknown, _v, _k, parent) {
    seen.push(this, parent);
  }, self);
  expect(seen).toEqual([self, h]);
});

test('iterating while a header is deleted: as Node does', () => {
  const [node, envd] = implementations.map(([, make]) => {
    const h = make({ a: '1', b: '2', c: '3' });
    const seen: string[] = [];
    for (const [name] of h) {
      seen.push(name);
      if (name === 'a') h.delete('b');
    }
    return seen;
  });
  expect(envd).toEqual(node);
});
