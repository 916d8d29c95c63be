// The native programs around the OCI runtime: the legacy-cgroups launcher
// that crun runs through, and the start hook's reading of its standard input.
import { spawn, spawnSync } from 'node:child_process';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';

const release = join(import.meta.dirname, '../build/Release');
const launcher = join(release, 'paddock-legacy-cgroups');
const CGROUP2_SUPER_MAGIC = 0x63677270;
const TMPFS_MAGIC = 0x01021994;
const fsType = (path: string) => {
  try {
    return statfsSync(path).type;
  } catch {
    return undefined;
  }
};
const hybrid = fsType('/sys/fs/cgroup') === TMPFS_MAGIC && fsType('/sys/fs/cgroup/unified') === CGROUP2_SUPER_MAGIC;

test('the launcher runs the program with its arguments and gives back its exit status', () => {
  const r = spawnSync(launcher, ['/bin/sh', '-c', 'echo "$0 $1"; exit 7', 'one', 'two'], { encoding: 'utf8' });
  expect(r.stdout).toBe('one two\n');
  expect(r.status).toBe(7);
});

test('the launcher refuses a relative program and says why when it cannot execute one', () => {
  const relative = spawnSync(launcher, ['sh', '-c', 'true'], { encoding: 'utf8' });
  expect(relative.status).toBe(2);
  expect(relative.stderr).toMatch(/usage: paddock-legacy-cgroups/);
  const missing = spawnSync(launcher, ['/no/such/program'], { encoding: 'utf8' });
  expect(missing.status).toBe(127);
  expect(missing.stderr).toBe("paddock-legacy-cgroups: cannot execute '/no/such/program': No such file or directory\n");
});

(hybrid ? test : test.skip)('on a hybrid cgroup host the program sees no cgroup v2 hierarchy, and the host keeps its own', () => {
  const inside = spawnSync(launcher, ['/usr/bin/stat', '-f', '-c', '%T', '/sys/fs/cgroup/unified'], { encoding: 'utf8' });
  expect(inside.status).toBe(0);
  expect(inside.stdout.trim()).not.toBe('cgroup2fs');
  // The v1 controllers stay.
  expect(spawnSync(launcher, ['/usr/bin/stat', '-f', '-c', '%T', '/sys/fs/cgroup/memory'], { encoding: 'utf8' }).stdout.trim()).toBe('cgroupfs');
  expect(fsType('/sys/fs/cgroup/unified')).toBe(CGROUP2_SUPER_MAGIC);
});

test('the start hook reads the state the OCI runtime writes to it to the end, even when it fails at once', async () => {
  // More than a pipe holds: the write completes only if the hook reads it all.
  const state = Buffer.alloc(256 * 1024, '{}');
  const hook = spawn(join(release, 'paddock-start-hook'), [], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  hook.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const written = new Promise<Error | undefined>((resolve) => {
    hook.stdin.on('error', resolve);
    hook.stdin.end(state, (err?: Error | null) => resolve(err ?? undefined));
  });
  const exited = new Promise<number | null>((resolve) => hook.on('exit', resolve));
  expect(await written).toBeUndefined();
  expect(await exited).toBe(2);
  expect(stderr).toMatch(/usage: paddock-start-hook/);
});
