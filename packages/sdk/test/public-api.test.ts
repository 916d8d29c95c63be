// The facade's public API has no `any` and no generated wire type: every
// export, and everything reachable from it, is typed by hand. A fixture that
// does leak both checks that the walk can find them.
import { join, resolve } from 'node:path';
import { publicApiFindings } from '../../../tools/jest/public-api.js';

test('the public API has no `any` and no generated type', () => {
  expect(publicApiFindings(resolve('src/index.ts'))).toEqual({ any: [], generated: [] });
}, 120_000);

test('the walk finds both in a module that leaks them', () => {
  const findings = publicApiFindings(join(import.meta.dirname, 'fixtures/leaky-api.ts'));
  expect(findings.any).toEqual(expect.arrayContaining(['loose', 'Holder.value']));
  expect(findings.generated).toEqual(
    expect.arrayContaining([expect.stringMatching(/^stat\(\).*EntryInfo/), expect.stringMatching(/^Holder\.entry: .*EntryInfo/)]),
  );
}, 120_000);
