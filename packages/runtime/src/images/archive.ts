// Local image archives: what `docker save` writes (manifest.json, a
// configuration and layer tars) and an OCI image layout in a tar
// (oci-layout, index.json, blobs/sha256/). The archive is unpacked into a
// work directory first, regular files and directories only, so that no
// path the archive names can lead anywhere else.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { extract, type ReadEntry } from 'tar';
import { RuntimeError } from '../runtime.js';
import { choosePlatform, MEDIA, parseManifest, type Descriptor, type Platform } from './manifest.js';
import { DIGEST } from './reference.js';

export interface ArchiveImage {
  /** The manifest's digest (an OCI layout), or the configuration's (`docker save`). */
  id: string;
  reference?: string;
  config: Buffer;
  layers: { path: string; digest?: string; size: number }[];
}

const sha256 = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

export async function readArchive(tarPath: string, work: string, platform: Platform, reference?: string): Promise<ArchiveImage> {
  const bad = (why: string) => new RuntimeError('invalid', `image archive '${tarPath}' ${why}`);
  if (!existsSync(tarPath)) throw new RuntimeError('not_found', `image archive '${tarPath}' does not exist`);
  try {
    await extract({
      file: tarPath,
      cwd: work,
      strict: true,
      preserveOwner: false,
      filter: (_path, entry) => ['File', 'OldFile', 'Directory'].includes((entry as ReadEntry).type),
    });
  } catch (err) {
    throw bad(`could not be read as a tar: ${(err as Error).message}`);
  }
  if (existsSync(join(work, 'index.json'))) return fromLayout(tarPath, work, platform, reference, bad);
  if (existsSync(join(work, 'manifest.json'))) return fromDockerSave(work, reference, bad);
  throw bad('is neither an OCI image layout (index.json) nor a docker save archive (manifest.json)');
}

function readJson(file: string, what: string, bad: (why: string) => RuntimeError): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw bad(`has an unreadable ${what}: ${(err as Error).message}`);
  }
}

function fromLayout(tarPath: string, work: string, platform: Platform, reference: string | undefined, bad: (why: string) => RuntimeError): ArchiveImage {
  const blob = (d: Descriptor) => {
    const file = join(work, 'blobs', 'sha256', d.digest.slice('sha256:'.length));
    if (!existsSync(file)) throw bad(`lacks blob ${d.digest}`);
    return file;
  };
  const document = (d: Descriptor) => {
    const bytes = readFileSync(blob(d));
    if (sha256(bytes) !== d.digest) throw bad(`has blob ${d.digest} whose content has digest ${sha256(bytes)}`);
    return bytes;
  };
  const indexBytes = readFileSync(join(work, 'index.json'));
  const index = parseManifest(indexBytes, MEDIA.ociIndex, tarPath);
  if (index.kind !== 'index' || index.manifests.length === 0) throw bad('has an index.json that lists no image');
  const raw = (readJson(join(work, 'index.json'), 'index.json', bad) as { manifests: { annotations?: Record<string, string> }[] }).manifests;
  // Entries with platforms are one image for several machines; entries without are different images.
  if (index.manifests.length > 1 && !index.manifests.some((m) => m.platform)) {
    const names = raw.map((m, i) => m.annotations?.['org.opencontainers.image.ref.name'] ?? index.manifests[i]!.digest);
    throw bad(`holds ${names.length} images (${names.join(', ')}); an archive of one image is imported`);
  }
  let top = index.manifests.some((m) => m.platform) ? choosePlatform(index, platform, tarPath) : index.manifests[0]!;
  const annotations = raw[index.manifests.indexOf(top)]?.annotations ?? {};
  const named = annotations['io.containerd.image.name'] ?? (annotations['org.opencontainers.image.ref.name']?.includes('/') ? annotations['org.opencontainers.image.ref.name'] : undefined);
  let manifest = parseManifest(document(top), top.mediaType, tarPath);
  if (manifest.kind === 'index') {
    top = choosePlatform(manifest, platform, tarPath);
    manifest = parseManifest(document(top), top.mediaType, tarPath);
    if (manifest.kind !== 'manifest') throw bad(`has index entry ${top.digest} that is itself an index`);
  }
  return {
    id: top.digest,
    reference: reference ?? named,
    config: document(manifest.config),
    layers: manifest.layers.map((l) => ({ path: blob(l), digest: l.digest, size: l.size })),
  };
}

function fromDockerSave(work: string, reference: string | undefined, bad: (why: string) => RuntimeError): ArchiveImage {
  const list = readJson(join(work, 'manifest.json'), 'manifest.json', bad);
  if (Array.isArray(list) && list.length > 1) {
    const names = list.map((e: { RepoTags?: unknown }, i) => (Array.isArray(e.RepoTags) && typeof e.RepoTags[0] === 'string' ? e.RepoTags[0] : `#${i + 1}`));
    throw bad(`holds ${names.length} images (${names.join(', ')}); an archive of one image is imported`);
  }
  const entry = Array.isArray(list) ? (list[0] as { Config?: unknown; RepoTags?: unknown; Layers?: unknown }) : undefined;
  if (!entry || typeof entry.Config !== 'string' || !Array.isArray(entry.Layers) || !entry.Layers.every((l) => typeof l === 'string')) {
    throw bad('has a manifest.json without Config and Layers');
  }
  const inside = (p: string) => {
    if (p.startsWith('/') || p.split('/').includes('..')) throw bad(`names '${p}', outside the archive`);
    const file = join(work, p);
    if (!existsSync(file)) throw bad(`lacks '${p}', which its manifest.json names`);
    return file;
  };
  const config = readFileSync(inside(entry.Config));
  const tags = Array.isArray(entry.RepoTags) ? entry.RepoTags.filter((t): t is string => typeof t === 'string') : [];
  return {
    id: sha256(config),
    reference: reference ?? tags[0],
    config,
    layers: (entry.Layers as string[]).map((p) => {
      const path = inside(p);
      // Newer docker save writes layers as blobs named by their digest.
      const m = /^blobs\/sha256\/([a-f0-9]{64})$/.exec(p);
      const digest = m && DIGEST.test(`sha256:${m[1]}`) ? `sha256:${m[1]}` : undefined;
      return { path, size: statSync(path).size, ...(digest ? { digest } : {}) };
    }),
  };
}
