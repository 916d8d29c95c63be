// Describes filesystem entries as EntryInfo messages.
import { create } from '@bufbuild/protobuf';
import { lstatSync, readlinkSync, type BigIntStats } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { EntryInfoSchema, FileType, type EntryInfo } from '@paddock/models';
import { readMetadata } from './metadata.js';
import type { Names } from './users.js';

function fileType(st: BigIntStats): FileType {
  if (st.isSymbolicLink()) return FileType.SYMLINK;
  if (st.isDirectory()) return FileType.DIRECTORY;
  if (st.isFile()) return FileType.FILE;
  return FileType.UNSPECIFIED;
}

const typeChar = (st: BigIntStats) =>
  st.isDirectory()
    ? 'd'
    : st.isSymbolicLink()
      ? 'l'
      : st.isCharacterDevice()
        ? 'c'
        : st.isBlockDevice()
          ? 'b'
          : st.isFIFO()
            ? 'p'
            : st.isSocket()
              ? 's'
              : '-';

/** Mode bits as `ls -l` prints them, e.g. `drwxr-xr-x` or `-rwsr-xr-x`. */
export function permissionString(st: BigIntStats): string {
  const m = Number(st.mode);
  const bit = (mask: number, ch: string) => (m & mask ? ch : '-');
  const exec = (x: number, special: number, on: string, off: string) =>
    m & special ? (m & x ? on : off) : m & x ? 'x' : '-';
  return (
    typeChar(st) +
    bit(0o400, 'r') +
    bit(0o200, 'w') +
    exec(0o100, 0o4000, 's', 'S') +
    bit(0o040, 'r') +
    bit(0o020, 'w') +
    exec(0o010, 0o2000, 's', 'S') +
    bit(0o004, 'r') +
    bit(0o002, 'w') +
    exec(0o001, 0o1000, 't', 'T')
  );
}

/** Describes the entry at `path` (not following a final symlink); throws like lstat. */
export function entryInfo(path: string, names: Names, st: BigIntStats = lstatSync(path, { bigint: true })): EntryInfo {
  const type = fileType(st);
  let symlinkTarget: string | undefined;
  if (type === FileType.SYMLINK) {
    try {
      symlinkTarget = resolve(dirname(path), readlinkSync(path));
    } catch {
      symlinkTarget = undefined;
    }
  }
  return create(EntryInfoSchema, {
    name: path === '/' ? '/' : basename(path),
    type,
    path,
    size: st.size,
    mode: Number(st.mode & 0o7777n),
    permissions: permissionString(st),
    owner: names.user(Number(st.uid)),
    group: names.group(Number(st.gid)),
    modifiedTime: { seconds: st.mtimeNs / 1_000_000_000n, nanos: Number(st.mtimeNs % 1_000_000_000n) },
    symlinkTarget,
    metadata: type === FileType.SYMLINK ? {} : readMetadata(path),
  });
}
