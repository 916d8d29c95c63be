// The built-in `base` template: the host's root filesystem, read-only, with
// its private areas masked, plus a layer that adds the user `user` (uid
// 1000, home /home/user, password-less sudo when sudo exists). Two layers:
// `mask` holds whiteouts that hide host paths, `layer` (above it) puts
// fresh, empty replacements and the user's files in their place.
import { chmodSync, chownSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { run } from './exec.js';

/** Bump when the recipe changes: templates of an older recipe are rebuilt under a new directory. */
export const BASE_RECIPE = 'base-v2';

export const SANDBOX_USER = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' };

/** Where envd and its pieces live inside every sandbox. */
export const IN_SANDBOX = {
  dir: '/.paddock',
  envd: '/.paddock/envd',
  node: '/.paddock/node',
};

/** Host paths hidden from sandboxes: homes, temporary and runtime state, logs, mail and private keys. */
export function defaultMasks(dataDir: string): string[] {
  const sshKeys = existsSync('/etc/ssh')
    ? readdirSync('/etc/ssh')
        .filter((f) => /^ssh_host_.*_key$/.test(f))
        .map((f) => join('/etc/ssh', f))
    : [];
  return ['/home', '/root', '/tmp', '/var/tmp', '/run', '/var/log', '/var/mail', '/var/spool/mail', '/var/backups', '/etc/ssl/private', ...sshKeys, resolve(dataDir)];
}

/** Creates `dir` inside `layer` with each missing parent copying the host directory's owner, mode and times. */
function mkdirLikeHost(layer: string, dir: string): void {
  let current = '/';
  for (const part of dir.split('/').filter(Boolean)) {
    current = join(current, part);
    const inLayer = join(layer, current);
    if (existsSync(inLayer)) continue;
    mkdirSync(inLayer);
    try {
      const st = statSync(current);
      chownSync(inLayer, st.uid, st.gid);
      chmodSync(inLayer, st.mode & 0o7777);
      utimesSync(inLayer, st.atime, st.mtime);
    } catch {
      chmodSync(inLayer, 0o755);
    }
  }
}

function put(layer: string, path: string, content: string, mode: number, uid = 0, gid = 0): void {
  mkdirLikeHost(layer, dirname(path));
  const target = join(layer, path);
  writeFileSync(target, content);
  chownSync(target, uid, gid);
  chmodSync(target, mode);
}

function freshDir(layer: string, path: string, mode: number, uid = 0, gid = 0): void {
  mkdirLikeHost(layer, dirname(path));
  const target = join(layer, path);
  mkdirSync(target, { recursive: true });
  chownSync(target, uid, gid);
  chmodSync(target, mode);
}

function readHost(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** The host's account file without entries for our user's name or id, plus ours. */
function accounts(text: string, drop: (fields: string[]) => boolean, add: string, transform?: (fields: string[]) => string[]): string {
  const kept = text
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => l.split(':'))
    .filter((f) => !drop(f))
    .map((f) => (transform ? transform(f) : f).join(':'));
  return [...kept, add].join('\n') + '\n';
}

const lockPassword = (f: string[]) => {
  // The host's password hashes stay on the host.
  if (f[1] && !f[1].startsWith('!') && f[1] !== '*' && f[1] !== 'x') f[1] = '*';
  return f;
};

async function buildMask(mask: string, masks: string[]): Promise<void> {
  for (const path of masks) {
    if (!existsSync(path) && !isSymlink(path)) continue;
    mkdirLikeHost(mask, dirname(path));
    // A character device 0/0 is overlayfs's whiteout: the path is gone below it.
    await run('mknod', [join(mask, path), 'c', '0', '0']);
  }
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

function buildLayer(layer: string): void {
  const u = SANDBOX_USER;
  freshDir(layer, '/tmp', 0o1777);
  freshDir(layer, '/var/tmp', 0o1777);
  freshDir(layer, '/var/log', 0o755);
  freshDir(layer, '/run', 0o755);
  freshDir(layer, '/run/lock', 0o1777);
  freshDir(layer, '/root', 0o700);
  freshDir(layer, '/home', 0o755);
  freshDir(layer, u.home, 0o750, u.uid, u.gid);
  if (existsSync('/etc/skel')) {
    cpSync('/etc/skel', join(layer, u.home), { recursive: true });
    for (const f of readdirSync('/etc/skel', { recursive: true }) as string[]) chownSync(join(layer, u.home, f), u.uid, u.gid);
  }
  if (existsSync('/etc/skel')) cpSync('/etc/skel', join(layer, '/root'), { recursive: true });
  freshDir(layer, IN_SANDBOX.dir, 0o755);
  freshDir(layer, IN_SANDBOX.envd, 0o755);
  put(layer, IN_SANDBOX.node, '', 0o755);

  const sameUser = (f: string[]) => f[0] === u.name || f[2] === String(u.uid);
  const sameGroup = (f: string[]) => f[0] === u.name || f[2] === String(u.gid);
  put(layer, '/etc/passwd', accounts(readHost('/etc/passwd'), sameUser, `${u.name}:x:${u.uid}:${u.gid}::${u.home}:${u.shell}`), 0o644);
  put(layer, '/etc/group', accounts(readHost('/etc/group'), sameGroup, `${u.name}:x:${u.gid}:`), 0o644);
  const shadowGroup = Number(/^shadow:[^:]*:(\d+):/m.exec(readHost('/etc/group'))?.[1] ?? 0);
  const shadow = accounts(readHost('/etc/shadow'), (f) => f[0] === u.name, `${u.name}:!:19000:0:99999:7:::`, lockPassword);
  const gshadow = accounts(readHost('/etc/gshadow'), (f) => f[0] === u.name, `${u.name}:!::`, lockPassword);
  // The backups that shadow(5)'s tools keep (`shadow-`, `gshadow-`) would
  // show the host's own: they get the same locked copies.
  for (const suffix of ['', '-']) {
    put(layer, `/etc/shadow${suffix}`, shadow, 0o640, 0, shadowGroup);
    put(layer, `/etc/gshadow${suffix}`, gshadow, 0o640, 0, shadowGroup);
  }
  put(layer, '/etc/hostname', 'sandbox\n', 0o644);
  put(layer, '/etc/hosts', '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n', 0o644);
  if (existsSync('/usr/bin/sudo') && existsSync('/etc/sudoers.d')) {
    put(layer, '/etc/sudoers.d/paddock-user', `${u.name} ALL=(ALL:ALL) NOPASSWD: ALL\n`, 0o440);
  }
}

/**
 * Builds the base template's layers into `dir` (`dir/mask`, `dir/layer`)
 * unless they exist. Built in a scratch directory and renamed into place,
 * so a crash never leaves half a template.
 */
export async function ensureBaseLayers(dir: string, masks: string[], progress: (msg: string) => void = () => undefined): Promise<void> {
  if (existsSync(join(dir, 'layer')) && existsSync(join(dir, 'mask'))) return;
  const scratch = `${dir}.building`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  progress(`masking ${masks.length} private host paths`);
  // A layer's top directory is the sandbox's `/` where no layer above has one.
  mkdirSync(join(scratch, 'mask'), { mode: 0o755 });
  await buildMask(join(scratch, 'mask'), masks.filter((m) => !masks.some((o) => o !== m && !relative(o, m).startsWith('..'))));
  progress("adding the user 'user' (uid 1000, home /home/user)");
  mkdirSync(join(scratch, 'layer'), { mode: 0o755 });
  buildLayer(join(scratch, 'layer'));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true });
  renameSync(scratch, dir);
  progress('base template ready');
}
