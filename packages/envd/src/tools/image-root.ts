// Where the build tools find an image's files. Inside a build container the
// image is `/` and the kernel resolves its paths. On the host (a COPY step
// placed into a new layer without a container) the image is a directory
// whose files earlier steps wrote: its symlinks point where the image's
// programs meant, `/etc` being the image's, not the host's. So the host
// resolves every path itself, one component at a time with lstat and
// readlink, an absolute target or a `..` never leaving the image's root;
// no fs call is ever given a path with a symlink the kernel would follow.
import { lstatSync, readlinkSync } from 'node:fs';

export interface ImageRoot {
  /**
   * The path through which this process reaches the image's `path`
   * (absolute in the image): its directories resolved as the image's
   * symlinks say, within the image, and its last component too when
   * `follow`. Past a component that is missing or not a directory, the
   * rest is appended as it is, for the call to fail on as it would inside.
   */
  at(path: string, follow?: boolean): string;
  /** The owner id this process gives a file for the image's id `id`. */
  id(id: number): number;
}

/** The image this process runs in: `/`, its ids its own (the build tools in a build container). */
export const ownRoot: ImageRoot = { at: (path) => path, id: (id) => id };

/** As many symlinks as Linux follows in one path lookup (MAXSYMLINKS). */
const MAX_LINKS = 40;

/**
 * The image at host directory `dir` (a mounted overlay of its layers),
 * whose ids start at host id `idShift` (the sandboxes' user namespace).
 * Nothing may change the image while it is used.
 */
export function hostRoot(dir: string, idShift: number): ImageRoot {
  const at = (path: string, follow = false): string => {
    if (!path.startsWith('/')) throw new Error(`image path '${path}' is not absolute`);
    const todo = path.split('/').filter(Boolean);
    const done: string[] = [];
    let links = 0;
    while (todo.length > 0) {
      const part = todo.shift()!;
      if (part === '.') continue;
      if (part === '..') {
        done.pop();
        continue;
      }
      const here = [dir, ...done, part].join('/');
      let st;
      try {
        st = lstatSync(here);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return [here, ...todo].join('/');
        throw err;
      }
      const last = todo.length === 0;
      if (st.isSymbolicLink() && (!last || follow)) {
        if (++links > MAX_LINKS) throw new Error(`image path '${path}': too many levels of symbolic links`);
        const target = readlinkSync(here);
        if (target.startsWith('/')) done.length = 0;
        todo.unshift(...target.split('/').filter(Boolean));
        continue;
      }
      // A file where a directory is wanted: the call fails on it (ENOTDIR), with nothing after it looked at.
      if (!last && !st.isDirectory()) return [here, ...todo].join('/');
      done.push(part);
    }
    return [dir, ...done].join('/');
  };
  return { at, id: (id) => id + idShift };
}
