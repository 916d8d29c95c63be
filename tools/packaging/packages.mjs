// The workspace's packages as the packaging tools see them.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Every package of the workspace: `{ name, dir (relative to the root), manifest }`. */
export function workspacePackages() {
  return readdirSync(join(repoRoot, 'packages'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => {
      const dir = `packages/${e.name}`;
      const manifest = JSON.parse(readFileSync(join(repoRoot, dir, 'package.json'), 'utf8'));
      return { name: manifest.name, dir, manifest };
    });
}

/** The packages that are published (not `private`). */
export function publicPackages() {
  return workspacePackages().filter((p) => !p.manifest.private);
}
