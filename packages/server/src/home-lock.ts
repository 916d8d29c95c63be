// One Paddock process at a time per data directory (a server, or an
// uninstall): a pid file, `server.pid`, made with O_EXCL and taken over when
// the process that made it is gone.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive } from '@paddock/runtime';

function holder(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Takes `home` for this process; gives the function that lets it go. Throws
 * when another live process holds it. This process may take it again.
 */
export function lockHome(home: string): () => void {
  const file = join(home, 'server.pid');
  const release = () => {
    if (holder(file) === process.pid) rmSync(file, { force: true });
  };
  // A stale file is removed and the create tried again; two processes that
  // both found it stale race on the create, and the loser sees the winner.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = holder(file);
    if (pid === process.pid) return release;
    if (pid !== undefined && processAlive(pid)) throw new Error(`another Paddock process (pid ${pid}) is using '${home}': stop it first`);
    rmSync(file, { force: true });
  }
  throw new Error(`could not take '${file}': other processes keep making it`);
}
