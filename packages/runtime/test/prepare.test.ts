// prepare() on a host where runc is missing or fails: the error says what is
// wrong, nothing is left mounted, and a later prepare succeeds.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultOciRuntime, ociRuntimeInUse, RuncRuntime } from '../src/index.js';
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
  const runtime = new RuncRuntime({ ...sharedImages, dataDir, ociRuntime: 'runc', runcBinary: join(dataDir, 'no-runc-here'), warmPoolSize: 0 });
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
  const runtime = new RuncRuntime({ ...sharedImages, dataDir, ociRuntime: 'runc', runcBinary: runc, warmPoolSize: 0 });

  await expect(runtime.prepare()).rejects.toThrow('runc list failed (exit 1): state directory is unreadable');
  expect(mountsUnder(dataDir)).toEqual([]);
  await expect(runtime.create({ templateId: 'base' })).rejects.toMatchObject({ kind: 'unavailable' });

  unlinkSync(broken);
  await runtime.prepare();
  expect(await runtime.list()).toEqual([]);
  await runtime.removeEverything();
  expect(await runtime.leftovers()).toEqual([]);
});

test("a data directory whose sandboxes one OCI runtime runs is refused by the other, which would not see them", async () => {
  const opts = { ...sharedImages, dataDir, warmPoolSize: 0, spareDisks: 0, network: false as const };
  const onRunc = new RuncRuntime({ ...opts, ociRuntime: 'runc' });
  await onRunc.prepare();
  const s = await onRunc.create({ templateId: 'base' });
  expect(ociRuntimeInUse(dataDir)).toBe('runc');
  // Named by no one, the runtime is the one the data directory's containers run on.
  const unnamed = new RuncRuntime({ ...sharedImages, dataDir, warmPoolSize: 0, spareDisks: 0, network: false, ociRuntime: undefined });
  expect(unnamed.ociRuntime).toBe('runc');
  expect((await unnamed.leftovers()).filter((l) => l.includes(s.id))).toContain(`runc container ${s.id}`);

  const onCrun = new RuncRuntime({ ...opts, ociRuntime: 'crun' });
  const refused = onCrun.prepare();
  await expect(refused).rejects.toMatchObject({ kind: 'unavailable' });
  await expect(refused).rejects.toThrow(`the data directory '${dataDir}' has 1 container(s) of runc (${join(dataDir, 'runc', s.id)}), and the runtime is set to crun`);
  // The sandbox runs on, on runc.
  expect((await onRunc.get(s.id))?.status).toBe('running');

  // Once its container is gone, crun takes the directory and starts the stopped sandbox again.
  await onRunc.stop(s.id);
  await onRunc.close();
  expect(ociRuntimeInUse(dataDir)).toBeUndefined();
  await onCrun.prepare();
  await onCrun.start(s.id);
  expect((await onCrun.get(s.id))?.status).toBe('running');
  expect(ociRuntimeInUse(dataDir)).toBe('crun');
  await onCrun.removeEverything();
  expect(await onCrun.leftovers()).toEqual([]);
  // With no container left, a data directory is the default's again: crun where it is installed.
  expect(new RuncRuntime({ ...sharedImages, dataDir, ociRuntime: undefined }).ociRuntime).toBe(defaultOciRuntime());
  expect(defaultOciRuntime()).toBe(execFileSync('sh', ['-c', 'command -v crun || true'], { encoding: 'utf8' }).trim() ? 'crun' : 'runc');
});

test('an OCI runtime other than runc and crun is refused by name', () => {
  expect(() => new RuncRuntime({ ...sharedImages, dataDir, ociRuntime: 'youki' as never })).toThrow("OCI runtime 'youki' is not one of runc, crun");
});
