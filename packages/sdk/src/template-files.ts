// Node only: the local files of a template's COPY steps. It finds them in the
// build context, hashes them (the key the server keeps uploads under, so an
// unchanged COPY is uploaded once) and packs them into a tar archive with
// node-tar. template.ts loads this module only when a template has a COPY,
// so that the rest of the SDK needs no Node built-ins.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { glob, lstat, mkdtemp, readdir, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, matchesGlob, posix, sep } from 'node:path';
import { create } from 'tar';
import { FileUploadError } from './errors.js';

export interface CopyFiles {
  /** Directory the sources are relative to; the current working directory when omitted. */
  context: string | undefined;
  /** Source as given to `copy`: a path or a glob, relative to the context. */
  src: string;
  dest: string;
  /** Glob patterns of paths to leave out, on top of the context's `.dockerignore`. */
  ignore: readonly string[];
  /** Archive what symlinks point to instead of the links. */
  resolveSymlinks: boolean;
}

export interface PackedFiles {
  path: string;
  size: number;
  /** Removes the archive; never throws. */
  cleanup(): Promise<void>;
}

const GLOB_CHARS = /[*?[\]{}]/;

/** The context's `.dockerignore` patterns: one a line, without comments and blank lines. */
function dockerignore(context: string): string[] {
  const file = join(context, '.dockerignore');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.replace(/^\/+/, '').replace(/\/+$/, ''));
}

function ignoredBy(patterns: readonly string[]): (rel: string) => boolean {
  return (rel) => {
    const parts = rel.split('/');
    // A pattern that matches a directory leaves out everything under it.
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      if (patterns.some((p) => matchesGlob(prefix, p))) return true;
    }
    return false;
  };
}

/** Every path the COPY takes, relative to the context with `/`, in a fixed order; directories with their contents. */
export async function copyEntries(spec: CopyFiles): Promise<string[]> {
  const files = { ...spec, context: spec.context ?? process.cwd() };
  const ignored = ignoredBy([...files.ignore, ...dockerignore(files.context)]);
  const matched: string[] = [];
  if (GLOB_CHARS.test(files.src)) {
    for await (const rel of glob(files.src, { cwd: files.context })) matched.push(rel.split(sep).join('/'));
  } else {
    const rel = posix.normalize(files.src).replace(/\/+$/, '');
    if (await lstat(join(files.context, rel)).catch(() => undefined)) matched.push(rel);
  }
  const entries = new Set<string>();
  for (const rel of matched) {
    if (ignored(rel)) continue;
    entries.add(rel);
    const info = files.resolveSymlinks ? await stat(join(files.context, rel)) : await lstat(join(files.context, rel));
    if (!info.isDirectory()) continue;
    for (const inner of await readdir(join(files.context, rel), { recursive: true })) {
      const innerRel = `${rel === '.' ? '' : `${rel}/`}${inner.split(sep).join('/')}`;
      if (!ignored(innerRel)) entries.add(innerRel);
    }
  }
  if (entries.size === 0) throw new FileUploadError(`no files match '${files.src}' in ${files.context}`);
  return [...entries].sort();
}

/**
 * The key of a COPY's files: its source and destination, then each entry's
 * path, mode, size and contents (a symlink's target when it is kept as a
 * link). Owners and times are left out, so the same files hash the same on
 * every machine.
 */
export async function filesHash(spec: CopyFiles): Promise<string> {
  const files = { ...spec, context: spec.context ?? process.cwd() };
  const hash = createHash('sha256');
  hash.update(`COPY ${files.src} ${files.dest}`);
  for (const rel of await copyEntries(files)) {
    const full = join(files.context, rel);
    hash.update(rel);
    const link = await lstat(full);
    const followed = link.isSymbolicLink() && files.resolveSymlinks ? await stat(full).catch(() => undefined) : undefined;
    if (link.isSymbolicLink() && !followed) {
      hash.update(`${link.mode}:${link.size}:${await readlink(full)}`);
      continue;
    }
    const info = followed ?? link;
    hash.update(`${info.mode}:${info.size}`);
    if (info.isFile()) {
      for await (const chunk of createReadStream(full)) hash.update(chunk as Buffer);
    }
  }
  return hash.digest('hex');
}

/** Packs a COPY's files into a tar archive (gzip-compressed when asked) in a temporary directory. */
export async function packFiles(spec: CopyFiles, gzip: boolean): Promise<PackedFiles> {
  const files = { ...spec, context: spec.context ?? process.cwd() };
  const entries = await copyEntries(files);
  const dir = await mkdtemp(join(tmpdir(), 'paddock-template-'));
  const cleanup = () => rm(dir, { recursive: true, force: true }).catch(() => undefined);
  const path = join(dir, gzip ? 'files.tar.gz' : 'files.tar');
  try {
    await create({ cwd: files.context, file: path, gzip, follow: files.resolveSymlinks, noDirRecurse: true, portable: true }, entries);
    return { path, size: (await stat(path)).size, cleanup };
  } catch (err) {
    await cleanup();
    throw new FileUploadError(`the files of '${files.src}' could not be packed: ${(err as Error).message}`, { cause: err });
  }
}
