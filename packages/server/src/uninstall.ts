// Removing a Paddock installation from this machine: every sandbox (running
// or paused, and the warm pool's), the mounts and cgroups the runtime made,
// and Paddock's own files in the data directory. `rm -rf ~/.paddock` is not
// enough: containers would keep running, and the runtime's mounts and
// cgroups would stay behind on the host.
import { RuncRuntime } from '@paddock/runtime';
import { existsSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { lockHome } from './home-lock.js';

/**
 * What Paddock keeps in its data directory. Anything else there is not its
 * own (the directory may be one the user chose with --home) and is left.
 */
const OWN_ENTRIES = ['runtime', 'paddock.db', 'paddock.db-wal', 'paddock.db-shm', 'paddock.db-journal', 'credentials.json', 'server.pid', 'build-files'];

export interface Installation {
  home: string;
  /** Sandboxes a user created, running or paused, by id. */
  sandboxes: string[];
  /** The runtime's other sandboxes: the warm pool's (and any a removal left half done). */
  pooled: number;
  /** Paddock's own entries in `home`, as they would be removed. */
  entries: string[];
  /** Entries of `home` that are not Paddock's: they stay, and so does `home`. */
  foreign: string[];
}

function runtimeOf(home: string): RuncRuntime {
  const dataDir = join(home, 'runtime');
  // No OCI runtime named: the one the server ran its containers with, whatever it is set to now.
  return new RuncRuntime({ dataDir, warmPoolSize: 0, spareDisks: 0 });
}

/** Runs `fn` holding `home`'s lock; undefined when `home` does not exist. */
async function holding<T>(home: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (!existsSync(home)) return undefined;
  if (!statSync(home).isDirectory()) throw new Error(`'${home}' is not a directory`);
  const unlock = lockHome(home);
  try {
    return await fn();
  } finally {
    unlock();
  }
}

async function inspect(home: string): Promise<Installation> {
  const present = readdirSync(home);
  const entries = present.filter((e) => OWN_ENTRIES.includes(e) && e !== 'server.pid');
  const foreign = present.filter((e) => !OWN_ENTRIES.includes(e));
  const sandboxesDir = join(home, 'runtime', 'sandboxes');
  if (!existsSync(sandboxesDir)) return { home, sandboxes: [], pooled: 0, entries, foreign };
  const sandboxes = (await runtimeOf(home).list()).map((s) => s.id).sort();
  const pooled = readdirSync(sandboxesDir).length - sandboxes.length;
  return { home, sandboxes, pooled, entries, foreign };
}

/**
 * What {@link uninstall} would remove, without removing anything. Undefined
 * when `home` does not exist. Fails when `home` is not a directory, or when
 * a server is using it.
 */
export function inspectInstallation(home: string): Promise<Installation | undefined> {
  return holding(home, () => inspect(home));
}

/**
 * Destroys every sandbox of the installation in `home` and removes what
 * Paddock put on the host: its containers, mounts and cgroups, and its own
 * entries in `home` (the database, the runtime's directory with templates
 * and sandboxes, the CLI's saved key). `home` itself goes too when nothing
 * else is in it. Refused while a server is using `home`. Nothing in `home`
 * is deleted unless the runtime left nothing mounted under it. Gives what
 * was there, as {@link inspectInstallation} saw it; undefined when `home`
 * does not exist.
 */
export async function uninstall(home: string): Promise<Installation | undefined> {
  const found = await holding(home, async () => {
    const found = await inspect(home);
    if (existsSync(join(home, 'runtime'))) {
      const runtime = runtimeOf(home);
      await runtime.removeEverything();
      const left = await runtime.leftovers();
      if (left.length > 0) throw new Error(`the runtime could not remove everything, so nothing in '${home}' was deleted: ${left.join('; ')}`);
    }
    for (const entry of found.entries) rmSync(join(home, entry), { recursive: true, force: true });
    return found;
  });
  // The lock's file is gone with the lock.
  if (found && found.foreign.length === 0) rmdirSync(home);
  return found;
}
