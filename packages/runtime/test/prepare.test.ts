// prepare() on a host where runc is missing or fails: the error says what is
// wrong, nothing is left mounted, and a later prepare succeeds.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuncRuntime } from '../src/index.js';
import { sharedImages } from './harness.js';
import { mountPoints } from '../src/mounts.js';

/** Mount points under `dir`, from the kernel's mount table (not from the runtime's own bookkeeping). */
const mountsUnder = (dir: string): string[] => [...mountPoints()].filter((m) => m.startsWith(dir + '/'));

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'paddock-rt-'));
});
afterEach(() => {
  // What a failing test left mounted is unmounted before the directory goes,
  // so that the delete does not walk into a mount.
  const left = mountsUnder(dataDir);
  for (const m of [...left].reverse()) execFileSync('umount', ['--lazy', m]);
  rmSync(dataDir, { recursive: true, force: true });
  expect(left).toEqual([]);
});

test('without runc, prepare says runc is missing and how to install it, and mounts nothing', async () => {
  const runtime = new RuncRuntime({ ...sharedImages, dataDir, runcBinary: join(dataDir, 'no-runc-here'), warmPoolSize: 0 });
  const failed = runtime.prepare();
  await expect(failed).rejects.toMatchObject({ kind: 'unavailable' });
  await expect(failed).rejects.toThrow(`runc does not run: '${join(dataDir, 'no-runc-here')}' is not installed (not found)`);
  await expect(failed).rejects.toThrow('apt-get install -y runc');
  expect(mountsUnder(dataDir)).toEqual([]);
});

test('a first prepare that fails part-way leaves nothing mounted and takes no creates; a later one succeeds', async () => {
  // runc itself, except that `list` fails while the file `broken` exists:
  // recover() runs it after envd's files are in place.
  const realRunc = execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim();
  const broken = join(dataDir, 'broken');
  const runc = join(dataDir, 'runc-wrapper');
  writeFileSync(
    runc,
    `#!/bin/sh\ncase " $* " in *" list "*) if [ -e '${broken}' ]; then echo 'level=error msg="state directory is unreadable"' >&2; exit 1; fi;; esac\nexec '${realRunc}' "$@"\n`,
  );
  chmodSync(runc, 0o755);
  writeFileSync(broken, '');
  const runtime = new RuncRuntime({ ...sharedImages, dataDir, runcBinary: runc, warmPoolSize: 0 });

  await expect(runtime.prepare()).rejects.toThrow('runc list failed (exit 1): state directory is unreadable');
  expect(mountsUnder(dataDir)).toEqual([]);
  await expect(runtime.create({ templateId: 'base' })).rejects.toMatchObject({ kind: 'unavailable' });

  unlinkSync(broken);
  await runtime.prepare();
  expect(await runtime.list()).toEqual([]);
  await runtime.removeEverything();
  expect(await runtime.leftovers()).toEqual([]);
});
