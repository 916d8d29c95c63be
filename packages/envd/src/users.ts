// The sandbox's users, read from its passwd and group files. envd acts as
// these users: processes run with their uid/gid and files are created owned
// by them. The files are re-read when they change, so users added inside a
// running sandbox (useradd) are seen at once. Root, uid 0, is there in every
// image, whether its passwd file names it or not (a scratch image has none).
import { closeSync, fstatSync, openSync, readFileSync, statSync, constants as fsc, type Stats } from 'node:fs';

export interface User {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

interface Parsed<T> {
  key: string;
  value: T;
}

/** What tells one version of a file from the next: a regular file only, so that anything else is never taken as unchanged. */
function keyOf(st: Stats): string {
  return st.isFile() ? `${st.mtimeMs}:${st.size}:${st.ino}` : 'not a regular file';
}

class CachedFile<T> {
  private key = '';
  private value: T;

  constructor(
    private readonly path: string,
    private readonly parse: (text: string) => T,
    empty: T,
  ) {
    this.value = empty;
  }

  get(): T {
    let next: Parsed<T> | undefined;
    try {
      // Every lookup costs one stat while the file is unchanged. Only a
      // regular file is read: a read of a FIFO would wait for a writer, and
      // envd would answer nothing meanwhile. It is opened non-blocking, and
      // checked again and read through that one descriptor, so that nothing
      // can be swapped in after the stat; anything else counts as missing.
      if (keyOf(statSync(this.path)) === this.key) return this.value;
      const fd = openSync(this.path, fsc.O_RDONLY | fsc.O_NONBLOCK);
      try {
        const st = fstatSync(fd);
        if (!st.isFile()) throw new Error(`${this.path} is not a regular file`);
        next = { key: keyOf(st), value: this.parse(readFileSync(fd, 'utf8')) };
      } finally {
        closeSync(fd);
      }
    } catch {
      next = { key: 'missing', value: this.parse('') };
    }
    this.key = next.key;
    this.value = next.value;
    return this.value;
  }
}

interface Passwd {
  byName: Map<string, User>;
  /** The first user of each uid, as a linear search of the file finds. */
  byUid: Map<number, User>;
}

function parsePasswd(text: string): Passwd {
  const byName = new Map<string, User>();
  const byUid = new Map<number, User>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, , uid, gid, , home, shell] = line.split(':');
    if (!name || uid === undefined || gid === undefined) continue;
    const u = Number(uid);
    const g = Number(gid);
    if (!Number.isInteger(u) || !Number.isInteger(g) || byName.has(name)) continue;
    const user = { name, uid: u, gid: g, home: home || '/', shell: shell || '/bin/sh' };
    byName.set(name, user);
    if (!byUid.has(u)) byUid.set(u, user);
  }
  return { byName, byUid };
}

function parseGroups(text: string): Map<number, string> {
  const groups = new Map<number, string>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, , gid] = line.split(':');
    const g = Number(gid);
    if (name && Number.isInteger(g) && !groups.has(g)) groups.set(g, name);
  }
  return groups;
}

/** Names of owners and groups as the files said when it was made; an unknown id is named by its number. */
export interface Names {
  user(uid: number): string;
  group(gid: number): string;
}

/** Root where the passwd file does not name it: at home in /root when the image has one, else in /. */
export function unlistedRoot(): User {
  let home = '/';
  try {
    if (statSync('/root').isDirectory()) home = '/root';
  } catch {
    // no /root
  }
  return { name: 'root', uid: 0, gid: 0, home, shell: '/bin/sh' };
}

export class UserDb {
  private readonly passwd: CachedFile<Passwd>;
  private readonly groups: CachedFile<Map<number, string>>;

  constructor(passwdFile = '/etc/passwd', groupFile = '/etc/group') {
    this.passwd = new CachedFile(passwdFile, parsePasswd, { byName: new Map(), byUid: new Map() });
    this.groups = new CachedFile(groupFile, parseGroups, new Map());
  }

  lookup(name: string): User | undefined {
    return this.passwd.get().byName.get(name) ?? (name === 'root' ? unlistedRoot() : undefined);
  }

  /**
   * Owner and group names from one look at the files: a listing of many
   * entries checks the files once, not twice per entry.
   */
  names(): Names {
    const { byUid } = this.passwd.get();
    const groups = this.groups.get();
    return {
      user: (uid) => byUid.get(uid)?.name ?? (uid === 0 ? 'root' : String(uid)),
      group: (gid) => groups.get(gid) ?? (gid === 0 ? 'root' : String(gid)),
    };
  }
}
