// Small pieces the runtime shares.
import { randomBytes } from 'node:crypto';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A sandbox id: 20 lowercase letters and digits, usable as a hostname and a DNS label. */
export function newSandboxId(): string {
  const bytes = randomBytes(20);
  let id = '';
  for (const b of bytes) id += ALPHABET[b % ALPHABET.length];
  return id;
}

export const SANDBOX_ID = /^[a-z0-9]{1,63}$/;

/** Serializes work per key: operations on one sandbox never interleave. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}

/** Bytes allocated under `dir` (files counted by their blocks, not followed through links). */
export async function diskUsage(dir: string): Promise<number> {
  let total = 0;
  const walk = async (d: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    await Promise.all(
      entries.map(async (e) => {
        const p = join(d, e.name);
        try {
          total += (await lstat(p)).blocks * 512;
        } catch {
          return;
        }
        if (e.isDirectory()) await walk(p);
      }),
    );
  };
  await walk(dir);
  return total;
}
