// Checks a Paddock server's log after a test: every line is a JSON object,
// and none holds a secret: an API key (by its shape, wherever it came from),
// or any access token the server's store handed out.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** E2B's API key shape; no log line may hold one, whichever key it is. */
export const API_KEY_SHAPE = /e2b_[0-9a-f]{40}/;

/** The envd and traffic access tokens a server's store (paddock.db in `home`) ever recorded. */
export async function storedTokens(home) {
  const file = `${home}/paddock.db`;
  if (!existsSync(file)) return [];
  // The server's own SQLite driver, wherever npm put it.
  const Database = createRequire(new URL('../../packages/server/package.json', import.meta.url))('better-sqlite3');
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare('SELECT envd_access_token AS a, traffic_access_token AS b FROM sandboxes')
      .all()
      .flatMap((r) => [r.a, r.b])
      .filter((t) => typeof t === 'string' && t.length > 0);
  } finally {
    db.close();
  }
}

/**
 * The log's lines, parsed; throws naming the line when one is not JSON or
 * holds an API key or one of `secrets`.
 */
export function auditLog(file, secrets = []) {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const lines = text.split('\n').filter((l) => l !== '');
  return lines.map((line, i) => {
    let parsed;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw new Error(`${file}:${i + 1} is not a JSON line: ${line.slice(0, 200)}`);
    }
    if (API_KEY_SHAPE.test(line)) throw new Error(`${file}:${i + 1} holds an API key: ${line.slice(0, 300)}`);
    const leaked = secrets.find((s) => s && line.includes(s));
    if (leaked) throw new Error(`${file}:${i + 1} holds a secret (${leaked.slice(0, 4)}…): ${line.slice(0, 300)}`);
    return parsed;
  });
}
