// The public API has no `any`: every exported declaration, and everything
// its members take and return, is typed. (The wire types it exports on
// purpose are generated; only `any` is looked for here.)
import { resolve } from 'node:path';
import { publicApiFindings } from '../../../tools/jest/public-api.js';

test('no exported declaration has `any` in what it takes or returns', () => {
  expect(publicApiFindings(resolve('src/index.ts')).any).toEqual([]);
}, 60_000);
