// Where the local CLI finds the server: `$PADDOCK_HOME/credentials.json`,
// written by `paddock start` (mode 0600, root only). The server itself keeps
// API keys and the admin credential only as hashes; this file is the local
// client's copy of the first of each.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultHome } from '@paddock/server';

export interface Credentials {
  apiUrl: string;
  sandboxUrl: string;
  domain: string;
  apiKey: string;
  /** The admin credential, shown by the first start (`paddock team`, `paddock keys --team`). */
  adminKey?: string;
}

export function paddockHome(flag?: string): string {
  return resolve(flag ?? defaultHome());
}

const file = (home: string) => join(home, 'credentials.json');

export function readCredentials(home: string): Partial<Credentials> {
  try {
    return JSON.parse(readFileSync(file(home), 'utf8')) as Partial<Credentials>;
  } catch {
    return {};
  }
}

export function writeCredentials(home: string, c: Credentials): void {
  const tmp = `${file(home)}.tmp`;
  writeFileSync(tmp, JSON.stringify(c, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, file(home));
}
