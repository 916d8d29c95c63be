// The build context of `paddock template build`: the directory COPY and
// ADD read from, less what .dockerignore excludes; the files of one COPY
// source, their hash (the key the server keeps uploads by) and their tar
// archive, with paths relative to the context as the build API wants them.
import { createHash } from 'node:crypto';
import { closeSync, createReadStream, existsSync, lstatSync, openSync, readFileSync, readSync, readdirSync, readlinkSync, type Stats } from 'node:fs';
import { join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import dockerignoreModule, { type Ignore } from '@balena/dockerignore';
import { minimatch } from 'minimatch';
import { create as createTar } from 'tar';
import { CliError } from './output.js';

/** One file, directory or symlink of a COPY source. */
export interface ContextEntry {
  /** Relative to the context, with '/'. */
  path: string;
  stats: Stats;
}

export interface CopyFiles {
  entries: ContextEntry[];
  /** sha256 of the entries' paths, modes, sizes and contents (or link targets). */
  hash: string;
  /** Bytes of the files, for progress. */
  bytes: number;
}

const GLOB = /[*?[\]]/;
// A CommonJS module whose types declare its function as the default export; it is also there at run time.
const dockerignore = dockerignoreModule.default;

/** The kinds of archive Docker's ADD unpacks, by their first bytes. */
function archiveKind(file: string): string | undefined {
  const head = Buffer.alloc(262);
  const fd = openSync(file, 'r');
  let n: number;
  try {
    n = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const b = head.subarray(0, n);
  if (b[0] === 0x1f && b[1] === 0x8b) return 'gzip';
  if (b.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2';
  if (b.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (b.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))) return 'zstd';
  if (b.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
  return undefined;
}

export class BuildContext {
  private constructor(
    readonly dir: string,
    private readonly ignore: Ignore | undefined,
    /** Whether some pattern re-includes paths (`!`), so that an excluded directory must still be walked. */
    private readonly reincludes: boolean,
    /** Which ignore file applies, for messages. */
    readonly ignoreFile: string | undefined,
  ) {}

  /**
   * The context `dir`, with the ignore file Docker would use: the one beside
   * the Dockerfile named after it (`app.Dockerfile.dockerignore`), else the
   * context's `.dockerignore`. A pattern that cannot be read is an error
   * naming its line.
   */
  static open(dir: string, dockerfile: string, shown: (path: string) => string = (p) => p): BuildContext {
    if (!existsSync(dir) || !lstatSync(dir).isDirectory()) throw new CliError(`the build context '${dir}' is not a directory`);
    const file = [`${dockerfile}.dockerignore`, join(dir, '.dockerignore')].find((f) => existsSync(f));
    if (!file) return new BuildContext(dir, undefined, false, undefined);
    const lines = readFileSync(file, 'utf8').split(/\r?\n/);
    const ignore = dockerignore({ ignorecase: false });
    let reincludes = false;
    for (const [i, raw] of lines.entries()) {
      const pattern = raw.trim();
      if (!pattern || pattern.startsWith('#')) continue;
      try {
        // Patterns compile when first matched: match once to find a bad one here.
        dockerignore({ ignorecase: false }).add(pattern).ignores('a');
      } catch (err) {
        throw new CliError(`${shown(file)}:${i + 1}: '${pattern}' is not a pattern: ${(err as Error).message}`);
      }
      ignore.add(pattern);
      if (pattern.startsWith('!')) reincludes = true;
    }
    return new BuildContext(dir, ignore, reincludes, shown(file));
  }

  private ignored(path: string): boolean {
    return this.ignore?.ignores(path) ?? false;
  }

  /** Everything under the directory `rel` that the ignore file keeps, depth first, names sorted. */
  private walk(rel: string, into: ContextEntry[], skipped: string[]): void {
    const names = readdirSync(join(this.dir, rel)).sort();
    for (const name of names) {
      const path = rel === '.' ? name : `${rel}/${name}`;
      const stats = lstatSync(join(this.dir, path));
      const ignored = this.ignored(path);
      if (stats.isDirectory()) {
        if (ignored && !this.reincludes) continue;
        const at = into.length;
        this.walk(path, into, skipped);
        // An excluded directory is kept only for the files a '!' pattern brings back in it.
        if (!ignored || into.length > at) into.splice(at, 0, { path, stats });
      } else if (!ignored) {
        if (stats.isFile() || stats.isSymbolicLink()) into.push({ path, stats });
        else skipped.push(path);
      }
    }
  }

  /**
   * The entries of a COPY (or ADD) source as written in the Dockerfile: a
   * file, a directory (with everything under it) or a glob. A source that is
   * missing, outside the context, or all excluded is an error, as is an ADD
   * of an archive, which Docker would unpack. `notes` gets what was left out.
   */
  collect(source: string, opts: { add?: boolean; where: string; notes: string[] }): ContextEntry[] {
    const keyword = opts.add ? 'ADD' : 'COPY';
    const rel = posix.normalize(source.replace(/^\/+/, '') || '.').replace(/\/+$/, '') || '.';
    if (rel === '..' || rel.startsWith('../')) throw new CliError(`${opts.where}: ${keyword} source '${source}' is outside the build context`);
    const entries: ContextEntry[] = [];
    const skipped: string[] = [];
    /** What the source names itself, rather than finds under a directory it names. */
    let named: ContextEntry[];
    if (GLOB.test(rel)) {
      const parts = rel.split('/');
      const fixed = parts.slice(0, parts.findIndex((p) => GLOB.test(p))).join('/') || '.';
      const base = join(this.dir, fixed);
      if (existsSync(base) && lstatSync(base).isDirectory()) {
        const all: ContextEntry[] = [];
        this.walk(fixed, all, skipped);
        const matched = all.filter((e) => minimatch(e.path, rel, { dot: true }));
        // A directory that matches comes with what is under it.
        const dirs = matched.filter((e) => e.stats.isDirectory()).map((e) => `${e.path}/`);
        entries.push(...all.filter((e) => matched.includes(e) || dirs.some((d) => e.path.startsWith(d))));
      }
      named = entries.filter((e) => minimatch(e.path, rel, { dot: true }));
      if (entries.length === 0) throw new CliError(`${opts.where}: ${keyword} source '${source}' matches nothing in the build context${this.note()}`);
    } else {
      const full = join(this.dir, rel);
      let stats: Stats;
      try {
        stats = lstatSync(full);
      } catch {
        throw new CliError(`${opts.where}: ${keyword} source '${source}' is not in the build context ${this.dir}`);
      }
      if (stats.isDirectory()) {
        const ignored = rel !== '.' && this.ignored(rel);
        if (!ignored || this.reincludes) this.walk(rel, entries, skipped);
        if (rel !== '.' && (!ignored || entries.length > 0)) entries.unshift({ path: rel, stats });
      } else if (!this.ignored(rel)) {
        if (!stats.isFile() && !stats.isSymbolicLink()) throw new CliError(`${opts.where}: ${keyword} source '${source}' is not a file, a directory or a symlink`);
        entries.push({ path: rel, stats });
      }
      if (entries.length === 0) throw new CliError(`${opts.where}: ${keyword} source '${source}' ${this.ignoreFile ? `is excluded by ${this.ignoreFile}` : 'has no files'}`);
      named = entries.filter((e) => e.path === rel);
    }
    if (opts.add) {
      for (const e of named) {
        const kind = e.stats.isFile() ? archiveKind(join(this.dir, e.path)) : undefined;
        if (kind) throw new CliError(`${opts.where}: ADD of the ${kind} archive '${e.path}' would unpack it, which is not supported; COPY it and unpack it in a RUN step`);
      }
    }
    if (skipped.length > 0) opts.notes.push(`${opts.where}: left out what is not a file, a directory or a symlink: ${skipped.join(', ')}`);
    return entries;
  }

  private note(): string {
    return this.ignoreFile ? ` (after ${this.ignoreFile})` : '';
  }

  /**
   * The hash of a COPY's files: their paths, modes, sizes and contents (a
   * symlink's target), so that unchanged files give the same hash however
   * often they are built, and the server's cache finds them.
   */
  async hash(entries: ContextEntry[]): Promise<CopyFiles> {
    const h = createHash('sha256').update('paddock template files 1\n');
    let bytes = 0;
    for (const e of entries) {
      const full = join(this.dir, e.path);
      h.update(`${e.path}\0${e.stats.mode}\0${e.stats.isDirectory() ? 0 : e.stats.size}\0`);
      if (e.stats.isSymbolicLink()) h.update(readlinkSync(full));
      else if (e.stats.isFile()) {
        bytes += e.stats.size;
        await pipeline(createReadStream(full), async (chunks: AsyncIterable<Buffer>) => {
          for await (const chunk of chunks) h.update(chunk);
        });
      }
      h.update('\n');
    }
    return { entries, hash: h.digest('hex'), bytes };
  }

  /** Writes the gzip-compressed tar archive of `entries` to `file`. */
  async archive(entries: ContextEntry[], file: string): Promise<void> {
    // node-tar reads a leading '@' as "the entries of that archive"; './' keeps it a path.
    const paths = entries.map((e) => (e.path.startsWith('@') ? `./${e.path}` : e.path));
    await createTar({ cwd: this.dir, file, gzip: true, portable: true, noDirRecurse: true }, paths);
  }
}
