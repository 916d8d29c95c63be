// The JSON documents of an image (OCI image-spec and Docker's v2 schema 2):
// manifests, indexes (manifest lists) and the image configuration, checked
// for the fields the store relies on, and the choice of one platform's
// manifest from an index.
import { arch } from 'node:os';
import { RuntimeError } from '../runtime.js';
import { DIGEST } from './reference.js';

export const MEDIA = {
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
} as const;

/** What a registry is asked for: either kind of manifest and of index. */
export const MANIFEST_ACCEPT = Object.values(MEDIA).join(', ');

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: Platform;
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface Manifest {
  kind: 'manifest';
  config: Descriptor;
  layers: Descriptor[];
}

export interface Index {
  kind: 'index';
  manifests: Descriptor[];
}

export interface ImageConfig {
  env: string[];
  workingDir?: string;
  user?: string;
  cmd?: string[];
  entrypoint?: string[];
}

export interface ParsedConfig {
  platform: Platform;
  diffIds: string[];
  config: ImageConfig;
}

/** A layer's media type: a tar, plain or compressed (the bytes say which). */
const LAYER_TYPE = /^application\/vnd\.(?:oci\.image\.layer(?:\.nondistributable)?\.v1\.tar|docker\.image\.rootfs\.(?:foreign\.)?diff\.tar)(?:\.gzip|\+gzip|\+zstd)?$/;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');

function parseJson(bytes: Buffer, what: string, image: string): Json {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new RuntimeError('invalid', `image '${image}': its ${what} is not JSON (${(err as Error).message})`);
  }
  if (!isObject(doc)) throw new RuntimeError('invalid', `image '${image}': its ${what} is not a JSON object`);
  return doc;
}

function descriptor(v: unknown, what: string, image: string): Descriptor {
  const bad = (why: string) => new RuntimeError('invalid', `image '${image}': ${what} ${why}`);
  if (!isObject(v)) throw bad('is not an object');
  const { mediaType, digest, size, platform } = v;
  if (typeof mediaType !== 'string') throw bad('has no mediaType');
  if (typeof digest !== 'string' || !DIGEST.test(digest)) throw bad(`has digest '${String(digest)}', not a sha256 digest`);
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw bad(`has size '${String(size)}', not a byte count`);
  const d: Descriptor = { mediaType, digest, size };
  if (isObject(platform) && typeof platform.os === 'string' && typeof platform.architecture === 'string') {
    d.platform = { os: platform.os, architecture: platform.architecture, ...(typeof platform.variant === 'string' ? { variant: platform.variant } : {}) };
  }
  return d;
}

/**
 * A manifest or an index, by its media type (the document's own, else the
 * one the registry or the layout gave).
 */
export function parseManifest(bytes: Buffer, givenType: string | undefined, image: string): Manifest | Index {
  const doc = parseJson(bytes, 'manifest', image);
  const type = typeof doc.mediaType === 'string' ? doc.mediaType : givenType?.split(';')[0]?.trim();
  if (doc.schemaVersion === 1) throw new RuntimeError('invalid', `image '${image}': Docker schema 1 manifests are not supported (push it again with a current client)`);
  if (type === MEDIA.ociIndex || type === MEDIA.dockerList || (type === undefined && Array.isArray(doc.manifests))) {
    if (!Array.isArray(doc.manifests)) throw new RuntimeError('invalid', `image '${image}': its index has no manifests list`);
    return { kind: 'index', manifests: doc.manifests.map((m, i) => descriptor(m, `index entry ${i}`, image)) };
  }
  if (type === MEDIA.ociManifest || type === MEDIA.dockerManifest || type === undefined) {
    if (!Array.isArray(doc.layers)) throw new RuntimeError('invalid', `image '${image}': its manifest has no layers list`);
    const layers = doc.layers.map((l, i) => descriptor(l, `layer ${i}`, image));
    for (const [i, l] of layers.entries()) {
      if (!LAYER_TYPE.test(l.mediaType)) throw new RuntimeError('invalid', `image '${image}': layer ${i} (${l.digest}) has media type '${l.mediaType}', which is not a tar layer`);
    }
    return { kind: 'manifest', config: descriptor(doc.config, 'config', image), layers };
  }
  throw new RuntimeError('invalid', `image '${image}': manifest media type '${type}' is not an image manifest or index`);
}

export function parseConfig(bytes: Buffer, image: string): ParsedConfig {
  const doc = parseJson(bytes, 'configuration', image);
  const bad = (why: string) => new RuntimeError('invalid', `image '${image}': its configuration ${why}`);
  const rootfs = doc.rootfs;
  if (!isObject(rootfs) || rootfs.type !== 'layers' || !strings(rootfs.diff_ids)) throw bad('has no rootfs.diff_ids list');
  for (const d of rootfs.diff_ids) if (!DIGEST.test(d)) throw bad(`has diff_id '${d}', not a sha256 digest`);
  if (typeof doc.os !== 'string' || typeof doc.architecture !== 'string') throw bad('names no os and architecture');
  const c = isObject(doc.config) ? doc.config : {};
  const config: ImageConfig = { env: strings(c.Env) ? c.Env : [] };
  if (typeof c.WorkingDir === 'string' && c.WorkingDir) config.workingDir = c.WorkingDir;
  if (typeof c.User === 'string' && c.User) config.user = c.User;
  if (strings(c.Cmd)) config.cmd = c.Cmd;
  if (strings(c.Entrypoint)) config.entrypoint = c.Entrypoint;
  const platform: Platform = { os: doc.os, architecture: doc.architecture, ...(typeof doc.variant === 'string' ? { variant: doc.variant } : {}) };
  return { platform, diffIds: rootfs.diff_ids, config };
}

const GOARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64' };

/** This machine's platform in the names images use. */
export function hostPlatform(): Platform {
  const architecture = GOARCH[arch()] ?? arch();
  const armVersion = (process.config.variables as unknown as Record<string, unknown>).arm_version;
  const variant = architecture === 'arm64' ? 'v8' : architecture === 'arm' && armVersion ? `v${String(armVersion)}` : undefined;
  return { os: 'linux', architecture, ...(variant ? { variant } : {}) };
}

export const platformName = (p: Platform) => `${p.os}/${p.architecture}${p.variant ? `/${p.variant}` : ''}`;

/** The entry of `index` for `want`: the same os and architecture, the same variant first, then one with none. */
export function choosePlatform(index: Index, want: Platform, image: string): Descriptor {
  const fits = index.manifests.filter((m) => m.platform?.os === want.os && m.platform.architecture === want.architecture);
  const chosen = fits.find((m) => m.platform?.variant === want.variant) ?? fits.find((m) => !m.platform?.variant) ?? fits[0];
  if (!chosen) {
    const offered = index.manifests.flatMap((m) => (m.platform && m.platform.os !== 'unknown' ? [platformName(m.platform)] : []));
    throw new RuntimeError('invalid', `image '${image}' has no ${platformName(want)} variant (it offers ${offered.length ? offered.join(', ') : 'no platform'})`);
  }
  if (chosen.mediaType !== MEDIA.ociManifest && chosen.mediaType !== MEDIA.dockerManifest) {
    throw new RuntimeError('invalid', `image '${image}': its ${platformName(want)} entry has media type '${chosen.mediaType}', not an image manifest`);
  }
  return chosen;
}
