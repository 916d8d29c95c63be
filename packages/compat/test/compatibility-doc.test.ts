// docs/compatibility.md names, in its last column, the tests that show each
// row. This keeps those names honest: every row names at least one test, and
// every test it names exists, with that exact name, in that file.
import { readFileSync } from 'node:fs';

const packages = new URL('../../', import.meta.url);
const doc = readFileSync(new URL('../docs/compatibility.md', packages), 'utf8');

const CITATION = /`((?:compat|server)\/test\/[\w.-]+\.test\.ts)` "([^"]+)"/g;

function tableRows(markdown: string): string[][] {
  const lines = markdown.split('\n');
  const header = lines.findIndex((l) => l.startsWith('| SDK feature |'));
  if (header < 0) throw new Error('no feature table in docs/compatibility.md');
  const rows: string[][] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

function declares(source: string, name: string): boolean {
  return [`'${name.replace(/'/g, "\\'")}'`, `"${name}"`].some((quoted) => new RegExp(`\\b(test|it|describe)\\(${escape(quoted)},`).test(source));
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const rows = tableRows(doc);

test('the table has its rows, each with four cells', () => {
  expect(rows.length).toBeGreaterThan(30);
  for (const row of rows) expect([row[0], row.length]).toEqual([row[0], 4]);
});

test.each(rows.map((r) => [r[0]!, r[3]!]))('%s: names tests that exist', (_feature, shownBy) => {
  const cited = [...shownBy.matchAll(CITATION)].map((m) => ({ file: m[1]!, name: m[2]! }));
  expect(cited.length).toBeGreaterThan(0);
  for (const { file, name } of cited) {
    const source = readFileSync(new URL(file, packages), 'utf8');
    expect([file, name, declares(source, name)]).toEqual([file, name, true]);
  }
  // A row shown only by a server test says so: those tests speak HTTP, not the e2b SDK.
  if (cited.every((c) => c.file.startsWith('server/'))) expect(shownBy).toContain('not by the e2b suite');
});
