// Template images: the base template's (a Debian root filesystem built here,
// or an image from a registry) and those of templates made from images,
// brought into the image store with their progress told to people.
import { basename } from 'node:path';
import { BASE_IMAGE_CONFIG, buildBaseRootfs } from './base-image.js';
import type { Image, ImageStore, LayerProgress, RegistryCredentials } from './images/index.js';
import type { TemplateImage } from './templates.js';

export interface BaseImageOptions {
  /** Where the built root filesystem is cached. */
  cacheDir: string;
  /** An image reference to pull instead of building Debian. */
  reference?: string;
  /** Build (or pull) again even when the store has it. */
  force?: boolean;
  onProgress?: (message: string) => void;
}

/**
 * The base template's image. The Debian root filesystem is named by its
 * recipe's hash, so that a store shared by several runtimes (every test's)
 * unpacks each recipe once.
 */
export async function baseImage(images: ImageStore, opts: BaseImageOptions): Promise<TemplateImage> {
  const say = opts.onProgress ?? (() => undefined);
  if (opts.reference) return pullImage(images, opts.reference, { onProgress: say });
  // A line per stage, and per tenth of a stage that tells its progress.
  let last = '';
  const base = await buildBaseRootfs({
    cacheDir: opts.cacheDir,
    onProgress: (p) => {
      const tenth = p.percent === undefined ? '' : ` (${Math.floor(p.percent / 10) * 10}%)`;
      const line = `base image: ${p.message.replace(/ \(\d+\/\d+\)$/, '')}${tenth}`;
      if (line !== last) say(line);
      last = line;
    },
    force: opts.force,
  });
  const reference = `paddock.local/base:${base.recipeHash.slice(0, 12)}`;
  const config = { ...BASE_IMAGE_CONFIG, env: [...BASE_IMAGE_CONFIG.env] };
  const known = await images.get(reference);
  if (!opts.force && known && known.diffIds.every((d) => images.hasLayer(d))) return templateImage({ ...known, config }, reference);
  say('base image: unpacking its root filesystem');
  const image = await images.importRootfsTar(base.tarPath, { reference, onProgress: progressReporter('base image', say) });
  return templateImage({ ...image, config }, reference);
}

/** An image from a registry, pulled unless the store has all of it. */
export async function pullImage(
  images: ImageStore,
  reference: string,
  opts: { onProgress?: (message: string) => void; auth?: RegistryCredentials } = {},
): Promise<TemplateImage> {
  const image = await images.pull(reference, { onProgress: progressReporter(reference, opts.onProgress ?? (() => undefined)), auth: opts.auth });
  return templateImage(image, reference);
}

/** An image from an archive (`docker save`, or an OCI layout as a tar). */
export async function importImage(images: ImageStore, archivePath: string, opts: { onProgress?: (message: string) => void; reference?: string } = {}): Promise<TemplateImage> {
  const image = await images.importArchive(archivePath, { onProgress: progressReporter(opts.reference ?? basename(archivePath), opts.onProgress ?? (() => undefined)), reference: opts.reference });
  return templateImage(image, image.references[0] ?? opts.reference ?? basename(archivePath));
}

export function templateImage(image: Pick<Image, 'id' | 'diffIds' | 'config'>, reference: string): TemplateImage {
  const c = image.config;
  return { id: image.id, reference, diffIds: image.diffIds, env: c.env, ...(c.workingDir ? { workingDir: c.workingDir } : {}), ...(c.user ? { user: c.user } : {}) };
}

/** Progress of a pull or an import as lines for people: a layer's start and end, and every tenth of a large one. */
function progressReporter(image: string, say: (message: string) => void): (p: LayerProgress) => void {
  const tenths = new Map<string, number>();
  const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
  return (p) => {
    // A registry layer by its digest; a local tar (its diff_id is known only once it is read) by its file name.
    const layer = p.layer.startsWith('sha256:') ? p.layer.slice(7, 19) : basename(p.layer);
    if (p.state === 'exists') return say(`${image}: layer ${layer} is here already`);
    if (p.state === 'done') return say(`${image}: layer ${layer} done (${mib(p.total || p.bytes)})`);
    const tenth = p.total > 0 ? Math.floor((10 * p.bytes) / p.total) : 0;
    if (tenths.get(p.layer) === tenth) return;
    tenths.set(p.layer, tenth);
    say(`${image}: ${p.state} layer ${layer}: ${mib(p.bytes)}${p.total ? ` of ${mib(p.total)} (${tenth * 10}%)` : ''}`);
  };
}

