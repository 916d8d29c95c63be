// `paddock keys`: API keys of the local server, kept as hashes in its store.
import { ApiKeys, openDb } from '@paddock/server';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readCredentials } from '../credentials.js';
import { CliError, EXIT, printJson, table } from '../output.js';

function withKeys<T>(home: string, fn: (keys: ApiKeys) => T): T {
  const file = join(home, 'paddock.db');
  if (!existsSync(file)) throw new CliError(`no Paddock data in ${home}`, EXIT.notFound, 'run `paddock start` first, or set PADDOCK_HOME');
  const db = openDb(file);
  try {
    return fn(new ApiKeys(db));
  } finally {
    db.close();
  }
}

export function createKey(home: string, name: string, json?: boolean): void {
  const { id, key } = withKeys(home, (k) => k.create(name));
  if (json) printJson({ id, name, key });
  else process.stdout.write(`${key}\n`);
  if (!json) process.stderr.write(`created key ${id} ('${name}'); it is shown only now\n`);
}

export function listKeys(home: string, json?: boolean): void {
  const keys = withKeys(home, (k) => k.list());
  if (json) return printJson(keys);
  process.stdout.write(
    table(
      ['id', 'name', 'key', 'created', 'last used'],
      keys.map((k) => [k.id, k.name, k.mask, new Date(k.createdAt).toISOString(), k.lastUsedAt ? new Date(k.lastUsedAt).toISOString() : '-']),
    ),
  );
}

export function revokeKey(home: string, id: string): void {
  if (!withKeys(home, (k) => k.remove(id))) throw new CliError(`no API key has id '${id}'`, EXIT.notFound, 'see `paddock keys list`');
}

export function currentKey(home: string): void {
  const key = readCredentials(home).apiKey;
  if (!key) throw new CliError(`no key is saved in ${home}/credentials.json`, EXIT.notFound, 'run `paddock start` (the first start saves one) or `paddock keys create`');
  process.stdout.write(`${key}\n`);
}
