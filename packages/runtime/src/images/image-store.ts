// The image store: images pulled from registries or imported from local
// archives, kept as unpacked layers that every template and sandbox of the
// host shares (read-only overlay lowers), and records of which layers make
// which image.
//
//   <dir>/store.json              the id shift the layers were unpacked with
//   <dir>/sha256/<hex>/fs/        a layer's tree, keyed by its diff_id
//   <dir>/sha256/<hex>/layer.json what it was unpacked from
//   <dir>/images/<hex>.json       an image, keyed by its manifest's digest
//   <dir>/tmp/<pid>.<random>/     work in progress, renamed into place whole
//
// A layer directory appears by one rename once complete, so whatever is in
// tmp/ of a process that is gone is a crash's leftover. Several processes
// may share one store: a layer two of them unpack at once is kept once.
import { createHash, randomBytes } from 'node:crypto';
import { chownSync, createReadStream, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RuntimeError } from '../runtime.js';
import { KeyedMutex, processAlive } from '../util.js';
import { readArchive, type ArchiveImage } from './archive.js';
import { unpackLayer, type LayerExpectation } from './layer-unpack.js';
import { choosePlatform, hostPlatform, parseConfig, parseManifest, platformName, type Descriptor, type ImageConfig, type ParsedConfig, type Platform } from './manifest.js';
import { DIGEST, digestReference, parseReference, type ImageRef } from './reference.js';
import { MAX_DOCUMENT, RegistryClient, type RegistryCredentials, type RegistryOptions } from './registry-client.js';

export interface ImageStoreOptions extends RegistryOptions {
  /** The store's directory; several data directories may share one. */
  dir: string;
  /** Host id of a sandbox's uid/gid 0: layers are owned by [idShift, idShift + 65536). */
  idShift: number;
  /** Layers fetched at once in one pull. */
  concurrency?: number;
}

export interface Image {
  /** The digest of its manifest (of its configuration, for a `docker save` archive or a rootfs tar). */
  id: string;
  /** Canonical references that name it (`docker.io/library/debian:bookworm`, `...@sha256:...`). */
  references: string[];
  /** Its layers, bottom first. */
  diffIds: string[];
  config: ImageConfig;
  platform: Platform;
  /** Bytes of its layers' uncompressed tars. */
  size: number;
}

export interface LayerProgress {
  /** The layer's digest as fetched (its diff_id for a plain tar). */
  layer: string;
  /** `exists`: already in the store; `downloading` from a registry, `unpacking` a local archive. */
  state: 'exists' | 'downloading' | 'unpacking' | 'done';
  bytes: number;
  total: number;
}

export interface PullOptions {
  onProgress?: (progress: LayerProgress) => void;
  signal?: AbortSignal;
  /** Credentials for this pull only (a build's registry login), used by a client of its own. */
  auth?: RegistryCredentials;
}

interface LayerRecord {
  diffId: string;
  digest: string;
  size: number;
  tarSize: number;
  idShift: number;
  createdAt: string;
}

/** What is needed to bring one layer into the store. */
interface LayerSource {
  /** Names the layer in progress and errors. */
  name: string;
  expect: LayerExpectation & { diffId: string };
  total: number;
  state: 'downloading' | 'unpacking';
  open(signal?: AbortSignal): Promise<AsyncIterable<Buffer> & { destroy?(): void }>;
}

const hex = (digest: string) => digest.slice('sha256:'.length);
const sha256 = (bytes: Buffer | string) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** Docker's PATH for an image that sets none. */
const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export class ImageStore {
  readonly dir: string;
  private readonly registry: RegistryClient;
  private readonly layerLocks = new KeyedMutex();
  private readonly recordLock = new KeyedMutex();
  /** Layers an operation of this process is bringing in or has just recorded: gc leaves them. */
  private readonly busy = new Map<string, number>();

  constructor(private readonly opts: ImageStoreOptions) {
    this.dir = opts.dir;
    this.registry = new RegistryClient(opts);
  }

  /** Makes the store's directories, checks its id shift and removes what crashed processes left in tmp/. */
  async open(): Promise<void> {
    for (const d of ['sha256', 'images', 'tmp']) mkdirSync(join(this.dir, d), { recursive: true, mode: 0o700 });
    const meta = join(this.dir, 'store.json');
    if (existsSync(meta)) {
      const { idShift } = JSON.parse(readFileSync(meta, 'utf8')) as { idShift: number };
      if (idShift !== this.opts.idShift) {
        throw new RuntimeError('invalid', `layer store '${this.dir}' holds layers owned from id ${idShift}; it cannot serve id shift ${this.opts.idShift}`);
      }
    } else {
      atomicWrite(meta, JSON.stringify({ version: 1, idShift: this.opts.idShift }) + '\n');
    }
    for (const name of readdirSync(join(this.dir, 'tmp'))) {
      if (!processAlive(Number(name.split('.')[0]))) rmSync(join(this.dir, 'tmp', name), { recursive: true, force: true });
    }
    // An image record is written beside itself (`<hex>.json.<pid>.<random>.tmp`) and renamed.
    for (const name of readdirSync(join(this.dir, 'images'))) {
      if (name.endsWith('.tmp') && !processAlive(Number(name.split('.')[2]))) rmSync(join(this.dir, 'images', name), { force: true });
    }
  }

  async close(): Promise<void> {
    await this.registry.close();
  }

  /** The overlay lower directories of `image`, top-most first. */
  layerDirs(image: Pick<Image, 'diffIds'>): string[] {
    return image.diffIds.map((d) => this.layerDir(d)).reverse();
  }

  private layerDir(diffId: string): string {
    return join(this.dir, 'sha256', hex(diffId), 'fs');
  }

  hasLayer(diffId: string): boolean {
    return existsSync(join(this.dir, 'sha256', hex(diffId)));
  }

  /** The image a reference (or an image id) names in the store, without asking any registry. */
  async get(reference: string): Promise<Image | undefined> {
    if (DIGEST.test(reference)) {
      const file = join(this.dir, 'images', `${hex(reference)}.json`);
      return existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as Image) : undefined;
    }
    const canonical = parseReference(reference).canonical;
    return (await this.list()).find((i) => i.references.includes(canonical));
  }

  async list(): Promise<Image[]> {
    const dir = join(this.dir, 'images');
    const names = (await readdir(dir)).filter((n) => n.endsWith('.json'));
    const images = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8').catch(() => 'null')) as Image | null));
    return images.filter((i): i is Image => i !== null);
  }

  /** Pulls `reference` from its registry: every document and layer checked against its digest. */
  async pull(reference: string, opts: PullOptions = {}): Promise<Image> {
    const ref = parseReference(reference);
    // Tokens a registry gives for one caller's credentials stay in that caller's client.
    const registry = opts.auth ? new RegistryClient({ ...this.opts, auth: { [ref.registry]: opts.auth } }) : this.registry;
    try {
      return await this.pullWith(registry, ref, opts);
    } finally {
      if (registry !== this.registry) await registry.close();
    }
  }

  private async pullWith(registry: RegistryClient, ref: ImageRef, opts: PullOptions): Promise<Image> {
    const image = ref.canonical;
    const { signal } = opts;
    const top = await this.fetchDocument(registry, ref, 'manifests', ref.digest ?? ref.tag!, signal);
    let manifestDigest = top.digest;
    let doc = parseManifest(top.bytes, top.contentType, image);
    if (doc.kind === 'index') {
      const chosen = choosePlatform(doc, hostPlatform(), image);
      const m = await this.fetchDocument(registry, ref, 'manifests', chosen.digest, signal, chosen);
      manifestDigest = m.digest;
      doc = parseManifest(m.bytes, m.contentType ?? chosen.mediaType, image);
      if (doc.kind !== 'manifest') throw new RuntimeError('invalid', `image '${image}': index entry ${chosen.digest} is itself an index`);
    }
    const configDoc = await this.fetchDocument(registry, ref, 'blobs', doc.config.digest, signal, doc.config);
    const parsed = this.checkConfig(parseConfig(configDoc.bytes, image), doc.layers.length, image);
    const sources = doc.layers.map((l, i): LayerSource => ({
      name: l.digest,
      expect: { digest: l.digest, size: l.size, diffId: parsed.diffIds[i]! },
      total: l.size,
      state: 'downloading',
      open: async (s) => (await registry.get(ref, 'blobs', l.digest, s)).body,
    }));
    const references = [image, ...(ref.digest ? [] : [digestReference(ref, manifestDigest)])];
    return this.bring(manifestDigest, references, parsed, sources, opts);
  }

  /** Imports a `docker save` archive or an OCI image layout in a tar; `reference` names it when the archive does not. */
  async importArchive(tarPath: string, opts: PullOptions & { reference?: string } = {}): Promise<Image> {
    const work = this.tmpDir('archive');
    try {
      const archive: ArchiveImage = await readArchive(tarPath, work, hostPlatform(), opts.reference);
      const name = archive.reference ?? tarPath;
      const parsed = this.checkConfig(parseConfig(archive.config, name), archive.layers.length, name);
      const sources = archive.layers.map((l, i): LayerSource => ({
        name: l.digest ?? parsed.diffIds[i]!,
        expect: { ...(l.digest ? { digest: l.digest, size: l.size } : {}), diffId: parsed.diffIds[i]! },
        total: l.size,
        state: 'unpacking',
        open: async () => createReadStream(l.path, { highWaterMark: 256 * 1024 }),
      }));
      const references = archive.reference ? [parseReference(archive.reference).canonical] : [];
      return await this.bring(archive.id, references, parsed, sources, opts);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  /** Imports one plain root filesystem tar (compressed or not) as a one-layer image named `reference`. */
  async importRootfsTar(tarPath: string, opts: PullOptions & { reference: string }): Promise<Image> {
    const canonical = parseReference(opts.reference).canonical;
    const platform = hostPlatform();
    if (!existsSync(tarPath)) throw new RuntimeError('not_found', `image '${canonical}': root filesystem tar '${tarPath}' does not exist`);
    const total = statSync(tarPath).size;
    const tmp = this.tmpDir('rootfs');
    let diffId: string | undefined;
    try {
      this.makeFs(tmp);
      const report = (bytes: number) => opts.onProgress?.({ layer: tarPath, state: 'unpacking', bytes, total });
      const stream = createReadStream(tarPath, { highWaterMark: 256 * 1024 });
      let done;
      try {
        done = await unpackLayer(stream, join(tmp, 'fs'), {}, { idShift: this.opts.idShift, image: canonical, layer: tarPath, onBytes: report, signal: opts.signal });
      } finally {
        stream.destroy();
      }
      const unpacked = done;
      diffId = done.diffId;
      this.hold(diffId, 1);
      await this.layerLocks.run(diffId, async () => this.commit(tmp, { ...unpacked, idShift: this.opts.idShift, createdAt: new Date().toISOString() }));
      const config = { architecture: platform.architecture, os: platform.os, config: { Env: [DEFAULT_PATH] }, rootfs: { type: 'layers', diff_ids: [diffId] } };
      const bytes = Buffer.from(JSON.stringify(config));
      opts.onProgress?.({ layer: tarPath, state: 'done', bytes: total, total });
      return await this.record(sha256(bytes), [canonical], parseConfig(bytes, canonical));
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      if (diffId) this.hold(diffId, -1);
    }
  }

  /**
   * Removes every layer not in `inUse` (diff_ids) and every image that has
   * one, except what an operation of this process is bringing in; gives the
   * diff_ids removed.
   */
  async gc(inUse: Set<string>): Promise<string[]> {
    const removed: string[] = [];
    for (const image of await this.list()) {
      if (image.diffIds.some((d) => !inUse.has(d) && !this.busy.has(d))) await rm(join(this.dir, 'images', `${hex(image.id)}.json`), { force: true });
    }
    for (const name of await readdir(join(this.dir, 'sha256'))) {
      const diffId = `sha256:${name}`;
      if (inUse.has(diffId) || this.busy.has(diffId)) continue;
      await this.layerLocks.run(diffId, async () => {
        if (this.busy.has(diffId)) return;
        // Out of sha256/ first, in one step: a layer is either whole there or not there.
        const doomed = this.tmpPath(`gc-${name.slice(0, 12)}`);
        await rename(join(this.dir, 'sha256', name), doomed);
        await rm(doomed, { recursive: true, force: true });
        removed.push(diffId);
      });
    }
    return removed;
  }

  private checkConfig(parsed: ParsedConfig, layers: number, image: string): ParsedConfig {
    const host = hostPlatform();
    if (parsed.platform.os !== host.os || parsed.platform.architecture !== host.architecture) {
      throw new RuntimeError('invalid', `image '${image}' is for ${platformName(parsed.platform)}; this host runs ${platformName(host)}`);
    }
    if (parsed.diffIds.length !== layers) {
      throw new RuntimeError('invalid', `image '${image}': its manifest has ${layers} layers and its configuration ${parsed.diffIds.length} diff_ids`);
    }
    return parsed;
  }

  /** A manifest or a configuration, read whole and checked against its digest (and its descriptor's size). */
  private async fetchDocument(registry: RegistryClient, ref: ImageRef, kind: 'manifests' | 'blobs', reference: string, signal: AbortSignal | undefined, desc?: Descriptor) {
    const res = await registry.get(ref, kind, reference, signal);
    const limit = Math.min(desc?.size ?? MAX_DOCUMENT, MAX_DOCUMENT);
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      length += chunk.length;
      if (length > limit) {
        res.body.destroy();
        throw new RuntimeError('invalid', `image '${ref.canonical}': ${kind === 'blobs' ? 'blob' : 'manifest'} ${reference} is larger than ${limit} bytes`);
      }
      chunks.push(chunk);
    }
    const bytes = Buffer.concat(chunks);
    const digest = sha256(bytes);
    const expected = DIGEST.test(reference) ? reference : res.digestHeader && DIGEST.test(res.digestHeader) ? res.digestHeader : undefined;
    if (expected && digest !== expected) {
      throw new RuntimeError('invalid', `image '${ref.canonical}': ${kind === 'blobs' ? 'blob' : 'manifest'} ${reference} has digest ${digest}, not ${expected}`);
    }
    if (desc && bytes.length !== desc.size) throw new RuntimeError('invalid', `image '${ref.canonical}': ${reference} is ${bytes.length} bytes, not the ${desc.size} its descriptor gives`);
    return { bytes, digest, contentType: res.contentType };
  }

  /** Brings every missing layer of an image into the store, some at once, and records the image. */
  private async bring(id: string, references: string[], parsed: ParsedConfig, sources: LayerSource[], opts: PullOptions): Promise<Image> {
    const diffIds = sources.map((s) => s.expect.diffId);
    for (const d of diffIds) this.hold(d, 1);
    try {
      const name = references[0] ?? id;
      // The first failure stops the layers still coming, and is the one reported.
      const stop = new AbortController();
      const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
      let failure: unknown;
      let next = 0;
      const worker = async () => {
        while (next < sources.length && failure === undefined) {
          try {
            await this.bringLayer(sources[next++]!, name, { ...opts, signal });
          } catch (err) {
            failure ??= err;
            stop.abort();
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.opts.concurrency ?? 3, sources.length) }, worker));
      if (failure !== undefined) throw failure;
      if (opts.signal?.aborted) throw new RuntimeError('unavailable', `image '${name}': the pull was cancelled`);
      return await this.record(id, references, parsed);
    } finally {
      for (const d of diffIds) this.hold(d, -1);
    }
  }

  private async bringLayer(source: LayerSource, image: string, opts: PullOptions): Promise<void> {
    const { diffId } = source.expect;
    const report = (state: LayerProgress['state'], bytes: number) => opts.onProgress?.({ layer: source.name, state, bytes, total: source.total });
    await this.layerLocks.run(diffId, async () => {
      if (this.hasLayer(diffId)) return report('exists', source.total);
      report(source.state, 0);
      const tmp = this.tmpDir('layer');
      try {
        this.makeFs(tmp);
        const stream = await source.open(opts.signal);
        let done;
        try {
          done = await unpackLayer(stream, join(tmp, 'fs'), source.expect, { idShift: this.opts.idShift, image, layer: source.name, onBytes: (b) => report(source.state, b), signal: opts.signal });
        } finally {
          stream.destroy?.();
        }
        this.commit(tmp, { ...done, idShift: this.opts.idShift, createdAt: new Date().toISOString() });
        report('done', source.total);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  }

  /** Renames an unpacked layer in `tmp` into the store; one another process put there first stands. */
  private commit(tmp: string, record: LayerRecord): void {
    writeFileSync(join(tmp, 'layer.json'), JSON.stringify(record, null, 2) + '\n');
    try {
      renameSync(tmp, join(this.dir, 'sha256', hex(record.diffId)));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    }
  }

  private async record(id: string, references: string[], parsed: ParsedConfig): Promise<Image> {
    return this.recordLock.run('images', async () => {
      const size = parsed.diffIds.reduce((sum, d) => sum + (JSON.parse(readFileSync(join(this.dir, 'sha256', hex(d), 'layer.json'), 'utf8')) as LayerRecord).tarSize, 0);
      const file = join(this.dir, 'images', `${hex(id)}.json`);
      const before = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as Image) : undefined;
      const image: Image = { id, references: [...new Set([...(before?.references ?? []), ...references])], diffIds: parsed.diffIds, config: parsed.config, platform: parsed.platform, size };
      // A reference names one image: a tag that moved leaves the image it named before.
      for (const other of await this.list()) {
        if (other.id === id || !other.references.some((r) => references.includes(r))) continue;
        other.references = other.references.filter((r) => !references.includes(r));
        await atomicWriteAsync(join(this.dir, 'images', `${hex(other.id)}.json`), JSON.stringify(other, null, 2) + '\n');
      }
      await atomicWriteAsync(file, JSON.stringify(image, null, 2) + '\n');
      return image;
    });
  }

  /** The root of a layer's tree: the sandbox's root owns it unless the layer says otherwise. */
  private makeFs(tmp: string): void {
    mkdirSync(join(tmp, 'fs'), { mode: 0o755 });
    chownSync(join(tmp, 'fs'), this.opts.idShift, this.opts.idShift);
  }

  private hold(diffId: string, by: 1 | -1): void {
    const n = (this.busy.get(diffId) ?? 0) + by;
    if (n > 0) this.busy.set(diffId, n);
    else this.busy.delete(diffId);
  }

  /** A new directory in tmp/, named for this process so that another process's open() leaves it alone. */
  private tmpDir(what: string): string {
    const dir = this.tmpPath(what);
    mkdirSync(dir, { mode: 0o700 });
    return dir;
  }

  private tmpPath(what: string): string {
    return join(this.dir, 'tmp', `${process.pid}.${what}-${randomBytes(6).toString('hex')}`);
  }
}

function atomicWrite(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

async function atomicWriteAsync(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
