// Paths in requests are absolute, or relative to the acting user's home;
// `~` and `~/...` also mean the home directory.
import { isAbsolute, join, resolve } from 'node:path';
import type { User } from './users.js';

export function resolveUserPath(path: string, user: User): string {
  if (path === '' || path === '~') return resolve(user.home);
  if (path.startsWith('~/')) return resolve(join(user.home, path.slice(2)));
  if (isAbsolute(path)) return resolve(path);
  return resolve(join(user.home, path));
}
