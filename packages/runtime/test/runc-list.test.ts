// `runc list` while containers are deleted. runc 1.1 gives up on the whole
// list when a container it found in its root is gone before it looks at it
// (`stat ROOT/ID: no such file or directory`); destroying sandboxes while
// they are listed did exactly that, and a Ctrl-C of the bench, whose
// teardown lists while failed creates clean up, left every sandbox behind.
// Here runc is real, behind a wrapper that answers the first `list` calls
// with that failure, as runc prints it.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Runc } from '../src/runc.js';

let dir: string;
let root: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-runc-list-'));
  root = join(dir, 'state');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/**
 * runc, except that its first `failures` list calls fail with a stat of
 * `statted` that found nothing; `calls()` counts the list calls.
 */
function flakyRunc(failures: number, statted: string): { binary: string; calls: () => number } {
  const realRunc = execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim();
  const counter = join(dir, 'list-calls');
  writeFileSync(counter, '');
  const binary = join(dir, 'runc-wrapper');
  writeFileSync(
    binary,
    [
      '#!/bin/sh',
      `case " $* " in *" list "*)`,
      `  echo x >> '${counter}'`,
      `  if [ "$(wc -l < '${counter}')" -le ${failures} ]; then`,
      `    echo 'time="2026-11-23T10:00:00Z" level=error msg="stat ${statted}: no such file or directory"' >&2; exit 1`,
      '  fi;;',
      'esac',
      `exec '${realRunc}' "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(binary, 0o755);
  return { binary, calls: () => readFileSync(counter, 'utf8').split('\n').filter(Boolean).length };
}

test('a container deleted while runc lists is not an error: the list is asked for again', async () => {
  const runc = flakyRunc(2, join(root, 'a1b2c3d4e5f6g7h8i9j0'));
  expect(await new Runc(root, runc.binary).list()).toEqual([]);
  expect(runc.calls()).toBe(3);
});

test('a list that keeps failing so gives up after five tries, with runc’s message', async () => {
  const runc = flakyRunc(100, join(root, 'a1b2c3d4e5f6g7h8i9j0'));
  await expect(new Runc(root, runc.binary).list()).rejects.toThrow(`runc list failed (exit 1): stat ${join(root, 'a1b2c3d4e5f6g7h8i9j0')}: no such file or directory`);
  expect(runc.calls()).toBe(5);
});

test('a missing path that is not a container of this root fails at once', async () => {
  const runc = flakyRunc(1, join(dir, 'elsewhere', 'state.json'));
  await expect(new Runc(root, runc.binary).list()).rejects.toThrow(`stat ${join(dir, 'elsewhere', 'state.json')}: no such file or directory`);
  expect(runc.calls()).toBe(1);
});
