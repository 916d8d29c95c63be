// The image's account files as the build tools read and extend them: the
// image's own /etc/passwd and /etc/group (read through its ImageRoot),
// whatever made them (Debian's shadow, busybox, a hand-written scratch
// image), and a file that is missing is empty.
import { closeSync, fchmodSync, fchownSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ImageRoot } from './image-root.js';
import { followedOrNone } from './place.js';

export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface Group {
  name: string;
  gid: number;
}

/** The text of the image's `file`, or '' when there is none; anything but a file (a FIFO that would never end) is an error. */
export function readAccountFile(root: ImageRoot, file: string): string {
  const st = followedOrNone(root, file);
  if (!st) return '';
  if (!st.isFile()) throw new Error(`'${file}' is not a file`);
  return readFileSync(root.at(file, true), 'utf8');
}

/** The colon-separated fields of each entry; comments and blank lines are not entries. */
function entries(text: string): string[][] {
  return text
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.split(':'));
}

const id = (field: string | undefined): number | undefined => (field !== undefined && /^\d+$/.test(field) ? Number(field) : undefined);

function parsePasswd(text: string): Account[] {
  const out: Account[] = [];
  for (const [name, , uid, gid, , home] of entries(text)) {
    const u = id(uid);
    const g = id(gid);
    if (name && u !== undefined && g !== undefined) out.push({ name, uid: u, gid: g, home: home || '/' });
  }
  return out;
}

function parseGroups(text: string): Group[] {
  const out: Group[] = [];
  for (const [name, , gid] of entries(text)) {
    const g = id(gid);
    if (name && g !== undefined) out.push({ name, gid: g });
  }
  return out;
}

/** One reading of /etc/passwd and /etc/group. */
export class Accounts {
  readonly users: Account[];
  readonly groups: Group[];

  constructor(private readonly root: ImageRoot) {
    this.users = parsePasswd(readAccountFile(root, '/etc/passwd'));
    this.groups = parseGroups(readAccountFile(root, '/etc/group'));
  }

  /**
   * The first entry of `name`, as a search of the file finds it. Root is
   * there whether the file names it or not (a scratch image has no file),
   * as envd takes it.
   */
  user(name: string): Account | undefined {
    // At home in /root when the image has one, else in /, as envd takes it.
    const unlistedRoot = () => ({ name, uid: 0, gid: 0, home: followedOrNone(this.root, '/root')?.isDirectory() ? '/root' : '/' });
    return this.users.find((u) => u.name === name) ?? (name === 'root' ? unlistedRoot() : undefined);
  }

  /** Like `user`, for a name that has to be there. */
  knownUser(name: string): Account {
    const user = this.user(name);
    if (!user) throw new Error(`user '${name}' is not in /etc/passwd`);
    return user;
  }

  group(name: string): Group | undefined {
    return this.groups.find((g) => g.name === name) ?? (name === 'root' ? { name, gid: 0 } : undefined);
  }

  /**
   * The uid and gid an owner (`user`, `user:group`, `uid`, `uid:gid`, the
   * form of Docker's `--chown`) stands for. Without a group: the user's
   * primary group, or for a uid the passwd file does not list, the gid of
   * the same number.
   */
  owner(spec: string): { uid: number; gid: number } {
    const parts = spec.split(':');
    const [userPart, groupPart] = parts;
    if (parts.length > 2 || !userPart || groupPart === '') throw new Error(`owner '${spec}' is not user, user:group, uid or uid:gid`);
    const uid = id(userPart);
    const user = uid === undefined ? this.knownUser(userPart) : this.users.find((u) => u.uid === uid);
    const owner = uid ?? user!.uid;
    if (groupPart === undefined) return { uid: owner, gid: user?.gid ?? owner };
    const gid = id(groupPart) ?? this.group(groupPart)?.gid;
    if (gid === undefined) throw new Error(`group '${groupPart}' is not in /etc/group`);
    return { uid: owner, gid };
  }
}

/**
 * Replaces `file` with `text` at once: written beside it and renamed over
 * it, so that a reader sees the old file or the new one, never a part. The
 * new file keeps the old one's mode and owner (the shadow file's 0640
 * root:shadow); a file that was not there gets `mode`, owned by root.
 */
export function replaceFile(file: string, text: string, mode = 0o644): void {
  let keep = { mode, uid: 0, gid: 0 };
  try {
    const st = statSync(file);
    keep = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const tmp = join(dirname(file), `.${basename(file)}.paddock-${process.pid}`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    try {
      fchownSync(fd, keep.uid, keep.gid);
      fchmodSync(fd, keep.mode);
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** `text` with `line` added at its end, on a line of its own. */
export function appendLine(text: string, line: string): string {
  return `${text}${text && !text.endsWith('\n') ? '\n' : ''}${line}\n`;
}
