// Templates on disk: each has a directory with meta.json and its own
// layer(s); a template made from another (a snapshot) stacks its layer on
// its parent's. The host's root filesystem is always the bottom layer.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE_RECIPE, ensureBaseLayers } from './base-template.js';
import { RuntimeError, type Limits, type TemplateInfo } from './runtime.js';

interface TemplateMeta {
  id: string;
  parentId: string | null;
  limits: Limits;
  createdAt: string;
  /** This template's own layer directories, top-most first, relative to its directory. */
  layers: string[];
}

export const BASE_TEMPLATE_ID = 'base';
export const DEFAULT_LIMITS: Limits = { cpuCount: 2, memoryMB: 512, diskSizeMB: 2048 };
const TEMPLATE_ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** The templates a runtime can start, each a chain of layer directories on this host with its limits. */
export class TemplateLayers {
  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  private metaPath(id: string): string {
    return join(this.dir, id, 'meta.json');
  }

  private read(id: string): TemplateMeta | undefined {
    if (!TEMPLATE_ID.test(id)) return undefined;
    try {
      return JSON.parse(readFileSync(this.metaPath(id), 'utf8')) as TemplateMeta;
    } catch {
      return undefined;
    }
  }

  private write(meta: TemplateMeta): void {
    const tmp = `${this.metaPath(meta.id)}.tmp`;
    writeFileSync(tmp, JSON.stringify(meta, null, 2));
    renameSync(tmp, this.metaPath(meta.id));
  }

  async ensureBase(masks: string[], progress?: (msg: string) => void): Promise<void> {
    const existing = this.read(BASE_TEMPLATE_ID);
    // A base made by an older recipe is made again by this one; the old
    // layers stay, as overlays of sandboxes running now still use them.
    const current = existing?.layers.every((l) => l.startsWith(`${BASE_RECIPE}/`) && existsSync(join(this.dir, BASE_TEMPLATE_ID, l)));
    if (current) return;
    const recipeDir = join(this.dir, BASE_TEMPLATE_ID, BASE_RECIPE);
    await ensureBaseLayers(recipeDir, masks, progress);
    this.write({
      id: BASE_TEMPLATE_ID,
      parentId: null,
      limits: existing?.limits ?? DEFAULT_LIMITS,
      createdAt: existing?.createdAt ?? new Date().toISOString(),
      layers: [join(BASE_RECIPE, 'layer'), join(BASE_RECIPE, 'mask')],
    });
  }

  get(id: string): TemplateInfo | undefined {
    const m = this.read(id);
    return m && { id: m.id, parentId: m.parentId, limits: m.limits, createdAt: new Date(m.createdAt) };
  }

  list(): TemplateInfo[] {
    return readdirSync(this.dir)
      .map((id) => this.get(id))
      .filter((t): t is TemplateInfo => t !== undefined);
  }

  /** Absolute layer directories of a template, top-most first, without the host root. */
  layers(id: string): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    for (let m = this.read(id); m; m = m.parentId ? this.read(m.parentId) : undefined) {
      if (seen.has(m.id)) throw new RuntimeError('internal', `template '${id}' has a cycle through '${m.id}'`);
      seen.add(m.id);
      out.push(...m.layers.map((l) => join(this.dir, m!.id, l)));
    }
    if (out.length === 0) throw new RuntimeError('not_found', `template '${id}' does not exist`);
    return out;
  }

  /** Where a new template's layer goes; commit() makes it a template. */
  newLayerDir(id: string): string {
    if (!TEMPLATE_ID.test(id)) throw new RuntimeError('invalid', `template id '${id}' must be lowercase letters, digits, '-' or '_' (at most 63)`);
    if (existsSync(join(this.dir, id))) throw new RuntimeError('conflict', `template '${id}' already exists`);
    const dir = join(this.dir, id, 'layer');
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  commit(id: string, parentId: string, limits: Limits): TemplateInfo {
    const meta: TemplateMeta = { id, parentId, limits, createdAt: new Date().toISOString(), layers: ['layer'] };
    this.write(meta);
    return this.get(id)!;
  }

  discard(id: string): void {
    rmSync(join(this.dir, id), { recursive: true, force: true });
  }

  children(id: string): string[] {
    return this.list()
      .filter((t) => t.parentId === id)
      .map((t) => t.id);
  }
}
