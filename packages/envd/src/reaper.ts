// As a container's init (pid 1), envd inherits every orphaned process in the
// sandbox and must collect them when they exit, or their zombies would use
// up the pids limit. Only zombies that are not envd's own tracked children
// are collected: libuv and node-pty wait for those themselves.
import { readFileSync } from 'node:fs';
import { native } from './native.js';

function zombieChildren(): number[] {
  let list: string;
  try {
    list = readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const pid of list.trim().split(/\s+/).filter(Boolean).map(Number)) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The state follows the command name, which is in parentheses.
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') out.push(pid);
    } catch {
      // gone already
    }
  }
  return out;
}

export function startReaper(isTracked: (pid: number) => boolean): () => void {
  if (process.pid !== 1) return () => undefined;
  let scheduled = false;
  const sweep = () => {
    scheduled = false;
    for (const pid of zombieChildren()) {
      if (isTracked(pid)) continue;
      try {
        native.waitStatus(pid);
      } catch {
        // collected by someone else meanwhile
      }
    }
  };
  const onChild = () => {
    if (!scheduled) {
      scheduled = true;
      setImmediate(sweep);
    }
  };
  process.on('SIGCHLD', onChild);
  // A backstop for signals that arrive while a sweep runs.
  const timer = setInterval(sweep, 5000).unref();
  return () => {
    process.off('SIGCHLD', onChild);
    clearInterval(timer);
  };
}
