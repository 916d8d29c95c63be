// Templates on disk: each has a directory with meta.json. A root template
// (the base, one made from an image) names an image in the image store,
// whose layers are the bottom of every sandbox made from it; a template
// made from another (a snapshot) stacks its own layer on its parent's.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RuntimeError, type Limits, type TemplateConfig, type TemplateInfo } from './runtime.js';

/** What a template keeps of its image: which it is, and how its processes run. */
export interface TemplateImage {
  /** The image's id in the image store. */
  id: string;
  /** Its layers (their diff_ids), bottom first. */
  diffIds: string[];
  /** Where it came from: a registry reference, or what made it (the base recipe). */
  reference: string;
  /** The image's environment (`KEY=value`), under what a caller sets. */
  env: string[];
  workingDir?: string;
  user?: string;
}

interface TemplateMeta {
  id: string;
  parentId: string | null;
  limits: Limits;
  createdAt: string;
  /** This template's own layer directories, top-most first, relative to its directory. */
  layers: string[];
  /**
   * A root template's image; a template made from another has its
   * parent's, with the config it was made with (a build's ENV, USER, WORKDIR).
   */
  image?: TemplateImage;
  /**
   * A snapshot's layers below its own, as they were when it was taken
   * (absolute, top-most first): the parent's base may have been made again
   * since, and the snapshot's files were made on the old one.
   */
  below?: string[];
  /**
   * The host id that file owners of the own layers start at (the user
   * namespace's shift); absent on layers made before sandboxes had user
   * namespaces, whose owners are host ids.
   */
  idShift?: number;
}

const configOf = (image: TemplateImage): TemplateConfig => ({
  env: image.env,
  ...(image.user ? { user: image.user } : {}),
  ...(image.workingDir ? { workingDir: image.workingDir } : {}),
});

/** The image record with `config` (when given) in place of its own. */
function withConfig(image: TemplateImage, config: TemplateConfig | undefined): TemplateImage {
  if (!config) return image;
  const { user: _user, workingDir: _workingDir, ...rest } = image;
  return { ...rest, ...configOf({ ...rest, ...config, env: [...config.env] }) };
}

/** Where image layers come from: the image store. */
export interface ImageLayers {
  /** Absolute layer directories of an image, top-most first. */
  layerDirs(image: { diffIds: string[] }): string[];
  hasLayer(diffId: string): boolean;
}

export const BASE_TEMPLATE_ID = 'base';
export const DEFAULT_LIMITS: Limits = { cpuCount: 2, memoryMB: 512, diskSizeMB: 2048 };
const TEMPLATE_ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** What staging directories' names start with: no template id does. */
const STAGING_PREFIX = '.new-';

/** The templates a runtime can start, each a chain of layer directories on this host with its limits. */
export class TemplateLayers {
  constructor(
    private readonly dir: string,
    private readonly images: ImageLayers,
  ) {
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
    mkdirSync(join(this.dir, meta.id), { recursive: true });
    const tmp = `${this.metaPath(meta.id)}.tmp`;
    writeFileSync(tmp, JSON.stringify(meta, null, 2));
    renameSync(tmp, this.metaPath(meta.id));
  }

  /** The root template of `id`'s chain: the one with the image. */
  private root(id: string): TemplateMeta {
    const seen = new Set<string>();
    let m = this.read(id);
    if (!m) throw new RuntimeError('not_found', `template '${id}' does not exist`);
    while (m.parentId) {
      if (seen.has(m.id)) throw new RuntimeError('internal', `template '${id}' has a cycle through '${m.id}'`);
      seen.add(m.id);
      const parent = this.read(m.parentId);
      if (!parent) throw new RuntimeError('not_found', `template '${id}' is made from '${m.parentId}', which does not exist`);
      m = parent;
    }
    return m;
  }

  /** Whether the base template exists with its image in the store. */
  baseReady(): boolean {
    const image = this.read(BASE_TEMPLATE_ID)?.image;
    return image !== undefined && image.diffIds.every((d) => this.images.hasLayer(d));
  }

  /** Makes (or remakes) a root template on an image; the limits of an existing one stay unless given. */
  setRoot(id: string, image: TemplateImage, limits?: Limits): TemplateInfo {
    if (!TEMPLATE_ID.test(id)) throw new RuntimeError('invalid', `template id '${id}' must be lowercase letters, digits, '-' or '_' (at most 63)`);
    const existing = this.read(id);
    if (existing?.parentId) throw new RuntimeError('conflict', `template '${id}' exists, made from '${existing.parentId}'`);
    // A root template has no layers of its own: those of an older kind of base go (recover() stopped their sandboxes).
    for (const old of existing?.layers ?? []) rmSync(join(this.dir, id, old.split('/')[0]!), { recursive: true, force: true });
    this.write({
      id,
      parentId: null,
      limits: limits ?? existing?.limits ?? DEFAULT_LIMITS,
      createdAt: existing?.createdAt ?? new Date().toISOString(),
      layers: [],
      image,
    });
    return this.get(id)!;
  }

  get(id: string): TemplateInfo | undefined {
    const m = this.read(id);
    if (!m) return undefined;
    let image: TemplateImage;
    try {
      image = this.image(id);
    } catch {
      // A template whose chain is broken (its parent gone) is not one that can be started.
      return undefined;
    }
    return {
      id: m.id,
      parentId: m.parentId,
      limits: m.limits,
      createdAt: new Date(m.createdAt),
      imageId: image.id,
      config: configOf(image),
    };
  }

  list(): TemplateInfo[] {
    return readdirSync(this.dir)
      .map((id) => this.get(id))
      .filter((t): t is TemplateInfo => t !== undefined);
  }

  /** The image a template stands on: its own record of it, else its chain's root's. */
  image(id: string): TemplateImage {
    const own = this.read(id)?.image;
    if (own) return own;
    const root = this.root(id);
    if (!root.image) throw new RuntimeError('unavailable', `template '${root.id}' was made before templates had images; make it again (paddock template rebuild ${root.id})`);
    return root.image;
  }

  /** Absolute layer directories of a template, top-most first, its image's included. */
  layers(id: string): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    let m = this.read(id);
    if (!m) throw new RuntimeError('not_found', `template '${id}' does not exist`);
    for (; m; m = m.parentId ? this.read(m.parentId) : undefined) {
      if (seen.has(m.id)) throw new RuntimeError('internal', `template '${id}' has a cycle through '${m.id}'`);
      seen.add(m.id);
      out.push(...m.layers.map((l) => join(this.dir, m!.id, l)));
      if (m.below) return [...out, ...m.below];
    }
    const image = this.image(id);
    const missing = image.diffIds.filter((d) => !this.images.hasLayer(d));
    if (missing.length) throw new RuntimeError('unavailable', `template '${id}' stands on image ${image.reference}, whose layer ${missing[0]} is no longer in the image store`);
    return [...out, ...this.images.layerDirs(image)];
  }


  /** Own layers made before sandboxes had user namespaces (owners are host ids), with their template. */
  unshiftedLayers(): { id: string; dir: string }[] {
    return this.list().flatMap((t) => {
      const m = this.read(t.id)!;
      return m.idShift === undefined ? m.layers.map((l) => ({ id: m.id, dir: join(this.dir, m.id, l) })) : [];
    });
  }

  /** Records that a template's own layers are owned by the range at `idShift`. */
  markShifted(id: string, idShift: number): void {
    const m = this.read(id);
    if (m) this.write({ ...m, idShift });
  }

  /** Throws unless `id` is a valid template id that no template has. */
  checkNewId(id: string): void {
    if (!TEMPLATE_ID.test(id)) throw new RuntimeError('invalid', `template id '${id}' must be lowercase letters, digits, '-' or '_' (at most 63)`);
    if (existsSync(join(this.dir, id))) throw new RuntimeError('conflict', `template '${id}' already exists`);
  }

  /**
   * A directory where a new template is made: `<dir>/layer` is for its
   * layer's files. Nothing takes it for a template (its name is none) until
   * commit() renames it into place whole, so that a crash part-way leaves
   * no half-made template, only a staging directory that stagingDirs() finds.
   */
  stage(id: string): { dir: string; layer: string } {
    this.checkNewId(id);
    const dir = join(this.dir, `${STAGING_PREFIX}${id}-${randomBytes(4).toString('hex')}`);
    const layer = join(dir, 'layer');
    mkdirSync(layer, { recursive: true });
    return { dir, layer };
  }

  /** Staging directories of templates that were never committed (a crash, a failure): to be removed. */
  stagingDirs(): string[] {
    return readdirSync(this.dir)
      .filter((name) => name.startsWith(STAGING_PREFIX))
      .map((name) => join(this.dir, name));
  }

  /** Makes the staged layer (`stage(id).dir`, with what the caller left in it besides `layer` removed) the template `id`. */
  commit(staged: string, id: string, parentId: string, limits: Limits, idShift: number, below: string[], config?: TemplateConfig): TemplateInfo {
    const meta: TemplateMeta = { id, parentId, limits, createdAt: new Date().toISOString(), layers: ['layer'], idShift, below, image: withConfig(this.image(parentId), config) };
    writeFileSync(join(staged, 'meta.json'), JSON.stringify(meta, null, 2));
    try {
      renameSync(staged, join(this.dir, id));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTEMPTY' || code === 'EEXIST') throw new RuntimeError('conflict', `template '${id}' already exists`);
      throw err;
    }
    return this.get(id)!;
  }

  /** A template with no layer of its own: `parentId`'s files, another config. */
  derive(id: string, parentId: string, config: TemplateConfig, limits?: Limits): TemplateInfo {
    this.checkNewId(id);
    const parent = this.read(parentId);
    if (!parent) throw new RuntimeError('not_found', `template '${parentId}' does not exist`);
    const below = this.layers(parentId);
    this.write({ id, parentId, limits: limits ?? parent.limits, createdAt: new Date().toISOString(), layers: [], idShift: parent.idShift, below, image: withConfig(this.image(parentId), config) });
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
