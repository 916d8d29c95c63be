// The USER step of a template build: the user the next steps and the
// template's sandboxes run as, created when the image does not have it. It
// is made as Debian 12's `useradd -m` makes one (also close to busybox's
// `adduser -D`), without either tool, as the image may have neither:
//
//   uid       above every uid in 1000..60000 (UID_MIN, UID_MAX), else the lowest free one there
//   group     the one of the same name if the image has it; else a new one,
//             with gid = uid when that gid is free, else chosen as the uid is
//   home      /home/<name>, mode 0755 (useradd: 0777 less UMASK 022, HOME_MODE
//             being unset), owned by the user, with a copy of /etc/skel; one
//             that exists is left as it is, as useradd leaves it
//   shell     /bin/bash where the image has it, else /bin/sh
//   password  locked: '!' in /etc/shadow (and /etc/gshadow), when the image has those files
import { lchownSync, mkdirSync, chmodSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Accounts, appendLine, readAccountFile, replaceFile, type Account } from './accounts.js';
import { ownRoot as root } from './image-root.js';
import { followedOrNone, lstatOrNone, makeDirs, place } from './place.js';

const validName = /^[a-z_][a-z0-9_-]*\$?$/;
const idRange = { min: 1000, max: 60000 };

/** A new id for `used`, as useradd picks one: past the highest in the range, else the lowest free. */
function nextId(used: Iterable<number>, what: string): number {
  const taken = new Set([...used].filter((n) => n >= idRange.min && n <= idRange.max));
  const above = taken.size ? Math.max(...taken) + 1 : idRange.min;
  if (above <= idRange.max) return above;
  for (let n = idRange.min; n <= idRange.max; n++) if (!taken.has(n)) return n;
  throw new Error(`no free ${what} is left in ${idRange.min}..${idRange.max}`);
}

/** Appends `line` to the account file `file`; a missing file is created only if `create`. */
function addLine(file: string, line: string, create: boolean): void {
  if (!create && !lstatOrNone(root, file)) return;
  replaceFile(file, appendLine(readAccountFile(root, file), line));
}

function createHome(home: string, uid: number, gid: number): void {
  if (lstatOrNone(root, home)) return;
  makeDirs(root, join(home, '..'), { uid: 0, gid: 0 });
  mkdirSync(home, 0o700);
  if (followedOrNone(root, '/etc/skel')?.isDirectory()) {
    for (const name of readdirSync('/etc/skel')) place(root, join('/etc/skel', name), join(home, name), { uid, gid, move: false });
  }
  lchownSync(home, uid, gid);
  chmodSync(home, 0o755);
}

function create(name: string, accounts: Accounts): Account {
  const uid = nextId(
    accounts.users.map((u) => u.uid),
    'uid',
  );
  const group = accounts.groups.find((g) => g.name === name);
  const gids = new Set(accounts.groups.map((g) => g.gid));
  const gid = group?.gid ?? (gids.has(uid) ? nextId(gids, 'gid') : uid);
  const home = `/home/${name}`;
  const shell = followedOrNone(root, '/bin/bash')?.isFile() ? '/bin/bash' : '/bin/sh';
  const days = Math.floor(Date.now() / 86_400_000);

  // The group first: no passwd entry ever names a group that is not there.
  if (!group) {
    addLine('/etc/group', `${name}:x:${gid}:`, true);
    addLine('/etc/gshadow', `${name}:!::`, false);
  }
  addLine('/etc/passwd', `${name}:x:${uid}:${gid}::${home}:${shell}`, true);
  addLine('/etc/shadow', `${name}:!:${days}:0:99999:7:::`, false);
  createHome(home, uid, gid);
  return { name, uid, gid, home };
}

/** The user `name` (created if the image has none of that name) as `uid gid home`. */
export function user(name: string): string {
  const accounts = new Accounts(root);
  let account = accounts.user(name);
  if (!account) {
    if (!validName.test(name) || name.length > 32) {
      throw new Error(`'${name}' is not a valid user name: at most 32 lower-case letters, digits, '_' and '-', starting with a letter or '_'`);
    }
    makeDirs(root, '/etc', { uid: 0, gid: 0 });
    account = create(name, accounts);
  }
  return `${account.uid} ${account.gid} ${account.home}`;
}
