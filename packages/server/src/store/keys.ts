// API keys: shown once when created, stored only as a SHA-256 hash.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { statement, type Db } from './db.js';

/** `e2b_` + 40 hex characters: the form every version of the official SDK accepts. */
export function newApiKey(): string {
  return `e2b_${randomBytes(20).toString('hex')}`;
}

const hashOf = (key: string) => createHash('sha256').update(key).digest('hex');

export interface ApiKeyInfo {
  id: string;
  name: string;
  mask: string;
  createdAt: number;
  lastUsedAt: number | null;
}

/** How often a key's last use is written: at most once a minute, not on every request. */
const TOUCH_INTERVAL_MS = 60_000;

export class ApiKeys {
  private readonly touched = new Map<string, number>();

  constructor(private readonly db: Db) {}

  count(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM api_keys').get() as { n: number }).n;
  }

  /** Stores a new key and returns it; this is the only time it exists in clear. */
  create(name: string, key = newApiKey()): { id: string; key: string } {
    const id = randomUUID();
    const mask = `${key.slice(0, 8)}…${key.slice(-4)}`;
    this.db.prepare('INSERT INTO api_keys (id, name, hash, mask, created_at) VALUES (?, ?, ?, ?, ?)').run(id, name, hashOf(key), mask, Date.now());
    return { id, key };
  }

  /** The id of the key, or undefined. The lookup is by hash; the final compare is constant-time. */
  verify(key: string | undefined): string | undefined {
    if (!key) return undefined;
    const hash = hashOf(key);
    const row = statement(this.db, 'SELECT id, hash FROM api_keys WHERE hash = ?').get(hash) as { id: string; hash: string } | undefined;
    if (!row || !timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined;
    return row.id;
  }

  touch(id: string): void {
    const now = Date.now();
    if (now - (this.touched.get(id) ?? 0) < TOUCH_INTERVAL_MS) return;
    this.touched.set(id, now);
    statement(this.db, 'UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now, id);
  }

  list(): ApiKeyInfo[] {
    return (this.db.prepare('SELECT id, name, mask, created_at, last_used_at FROM api_keys ORDER BY created_at').all() as Array<{
      id: string;
      name: string;
      mask: string;
      created_at: number;
      last_used_at: number | null;
    }>).map((r) => ({ id: r.id, name: r.name, mask: r.mask, createdAt: r.created_at, lastUsedAt: r.last_used_at }));
  }

  remove(id: string): boolean {
    return this.db.prepare('DELETE FROM api_keys WHERE id = ?').run(id).changes > 0;
  }
}
