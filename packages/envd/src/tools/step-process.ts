// How a build step's command runs when it is a build container's own
// process (the runtime runs it without envd): the user, home and working
// directory envd would give it, and the shell the server runs command lines
// with, found in the image. Read on the host through the image's ImageRoot,
// before anything of the container runs.
import { posix } from 'node:path';
import { Accounts } from './accounts.js';
import type { ImageRoot } from './image-root.js';
import { followedOrNone } from './place.js';

export interface StepProcessOptions {
  /** The user the step names; it must exist. */
  user?: string;
  /** Who runs it when the step names nobody (the template's user, else `user`); root where the image has no such user. */
  defaultUser: string;
  /** Its working directory, absolute or relative to the user's home. */
  cwd?: string;
  /** The template's working directory, for a step that names none. */
  defaultWorkdir?: string;
}

export interface StepProcess {
  user: string;
  uid: number;
  gid: number;
  home: string;
  /** Absolute, an existing directory of the image. */
  cwd: string;
  /** What runs a command line: bash as a login shell where the image has it (as the SDKs run commands), else sh. */
  shell: string[];
}

/** `path` for `home`'s user, as envd resolves paths: `~`, `~/x` and relative paths are in the home. */
function userPath(path: string, home: string): string {
  if (path === '' || path === '~') return posix.resolve(home);
  if (path.startsWith('~/')) return posix.resolve(home, path.slice(2));
  return posix.resolve(home, path);
}

export function stepProcess(root: ImageRoot, opts: StepProcessOptions): StepProcess {
  const accounts = new Accounts(root);
  let account;
  if (opts.user) {
    account = accounts.user(opts.user);
    // envd's words for a process of a user it does not know.
    if (!account) throw new Error(`user '${opts.user}' does not exist`);
  } else {
    account = accounts.user(opts.defaultUser) ?? accounts.user('root')!;
  }
  const cwd = userPath(opts.cwd || opts.defaultWorkdir || '', account.home);
  const st = followedOrNone(root, cwd);
  if (!st) throw new Error(`cwd '${cwd}' does not exist`);
  if (!st.isDirectory()) throw new Error(`cwd '${cwd}' is not a directory`);
  return {
    user: account.name,
    uid: account.uid,
    gid: account.gid,
    home: account.home,
    cwd,
    shell: followedOrNone(root, '/bin/bash') ? ['/bin/bash', '-l', '-c'] : ['/bin/sh', '-c'],
  };
}
