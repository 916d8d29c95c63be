// The host ids a sandbox's users are. Every sandbox runs in a user
// namespace that maps its uids and gids 0..ID_RANGE-1 onto the host's
// shift..shift+ID_RANGE-1: root inside is an unprivileged id outside. Image
// layers are unpacked once with their owners moved into that range, so all
// sandboxes of a host share it (as container engines do with a remapped
// user); what they still share through it is in docs/security.md.
import { chmod, lchown, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { RuntimeError } from './runtime.js';

/** The first host id of the sandboxes' range; far above the ids of a host's own users and of subuid ranges. */
export const DEFAULT_ID_SHIFT = 1_000_000_000;
/** How many ids a sandbox has: 0..65535, as in an image's files. */
export const ID_RANGE = 65536;

/** A shift that leaves room for the whole range below the kernel's invalid id (2^32 - 1). */
export function checkIdShift(shift: number): number {
  if (!Number.isInteger(shift) || shift < ID_RANGE || shift + ID_RANGE > 0xffff_ffff) {
    throw new RuntimeError('invalid', `idShift ${shift} must be a whole number from ${ID_RANGE} to ${0xffff_ffff - ID_RANGE}`);
  }
  return shift;
}

/**
 * Moves the owners of every file under `dir` (itself included, links not
 * followed) into the range starting at `shift`: what a template layer or a
 * sandbox's upper directory made before sandboxes had user namespaces
 * needs, so that their files stay their owners' inside. Owners already in
 * the range stay. chown(2) clears the set-user-ID and set-group-ID bits;
 * they are put back.
 */
export async function shiftOwners(dir: string, shift: number): Promise<number> {
  let moved = 0;
  const inRange = (id: number) => id >= shift && id < shift + ID_RANGE;
  const visit = async (path: string): Promise<void> => {
    const st = await lstat(path);
    if (!inRange(st.uid) || !inRange(st.gid)) {
      if (st.uid >= ID_RANGE && !inRange(st.uid)) throw new RuntimeError('internal', `'${path}' is owned by host uid ${st.uid}, outside 0..${ID_RANGE - 1}: it cannot be moved into the sandboxes' range`);
      await lchown(path, inRange(st.uid) ? st.uid : st.uid + shift, inRange(st.gid) ? st.gid : st.gid + shift);
      if (!st.isSymbolicLink() && st.mode & 0o6000) await chmod(path, st.mode & 0o7777);
      moved++;
    }
    if (st.isDirectory()) for (const name of await readdir(path)) await visit(join(path, name));
  };
  await visit(dir);
  return moved;
}
