// A real registry for tests: Debian's docker-registry (distribution) on
// 127.0.0.1, its storage in a temporary directory, with no auth, htpasswd
// (Basic) or token auth (a small token service here that signs JWTs with a
// certificate the registry trusts). Images are made here as OCI layouts
// (layers as tars written with node-tar's Header) and pushed with skopeo.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID, sign } from 'node:crypto';
import { copyFileSync, createReadStream, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { Readable } from 'node:stream';
import { createServer, type Server } from 'node:http';
import { freePort } from '../../../tools/testing/ports.mjs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';

export const USER = 'alice';
export const PASSWORD = 'wonderland';

export interface TestRegistry {
  /** `127.0.0.1:PORT` */
  host: string;
  storage: string;
  /** The file a blob is stored in, for tests that damage it. */
  blobFile(digest: string): string;
  /** The manifest the registry serves for `name:reference` (skopeo may have recompressed layers on the way in). */
  manifest(name: string, reference: string): Promise<{ layers: { mediaType: string; digest: string }[] }>;
  /**
   * Pushes `tag` of the OCI layout `dir` to `name:tag` here (`all`: every
   * platform of an index). Not synchronous: skopeo asks the token service,
   * which answers from this process.
   */
  push(dir: string, tag: string, name: string, opts?: { all?: boolean }): Promise<void>;
  /**
   * Uploads an image of the OCI layout `dir` as it is, through the registry
   * API (skopeo would compress uncompressed layers on the way); no auth.
   */
  upload(dir: string, name: string, tag: string, manifestDigest: string): Promise<void>;
  stop(): Promise<void>;
}

async function waitForRegistry(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry ended with ${child.exitCode}: ${log()}`);
    const status = await fetch(url).then((r) => r.status, () => 0);
    if (status === 200 || status === 401) return;
    if (Date.now() > deadline) throw new Error(`docker-registry did not answer at ${url}: ${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/** A token service for registry token auth: anyone may pull `public/*`; USER/PASSWORD may pull and push everything. */
async function startTokenService(dir: string, service: string): Promise<{ realm: string; cert: string; server: Server }> {
  const key = join(dir, 'token.key');
  const cert = join(dir, 'token.crt');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=paddock-test-token'], { stdio: 'ignore' });
  const keyPem = readFileSync(key);
  const der = Buffer.from(readFileSync(cert, 'utf8').replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const auth = req.headers.authorization;
    let user: string | undefined;
    if (auth) {
      const [u, p] = Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString().split(':');
      if (u !== USER || p !== PASSWORD) {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ details: 'wrong username or password' }));
        return;
      }
      user = u;
    }
    const access = url.searchParams.getAll('scope').flatMap((scope) => {
      const [type, name, actions] = scope.split(':');
      if (type !== 'repository' || !name) return [];
      const granted = (actions ?? '').split(',').filter((a) => user || (a === 'pull' && name.startsWith('public/')));
      return [{ type, name, actions: granted }];
    });
    const now = Math.floor(Date.now() / 1000);
    const header = b64url(JSON.stringify({ typ: 'JWT', alg: 'RS256', x5c: [der.toString('base64')] }));
    const claims = b64url(JSON.stringify({ iss: 'paddock-test', sub: user ?? '', aud: url.searchParams.get('service') ?? service, exp: now + 300, nbf: now - 10, iat: now, jti: randomUUID(), access }));
    const signature = b64url(sign('sha256', Buffer.from(`${header}.${claims}`), keyPem));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: `${header}.${claims}.${signature}`, expires_in: 300 }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { realm: `http://127.0.0.1:${port}/token`, cert, server };
}

export async function startRegistry(auth: 'none' | 'htpasswd' | 'token' = 'none'): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-registry-'));
  const storage = join(dir, 'storage');
  mkdirSync(storage);
  const port = await freePort();
  let authConfig = '';
  let tokenServer: Server | undefined;
  if (auth === 'htpasswd') {
    const hash = execFileSync('/usr/bin/python3', ['-W', 'ignore', '-c', `import crypt; print(crypt.crypt('${PASSWORD}', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))`], { encoding: 'utf8' }).trim();
    writeFileSync(join(dir, 'htpasswd'), `${USER}:${hash}\n`);
    authConfig = `auth:\n  htpasswd:\n    realm: paddock-test\n    path: ${join(dir, 'htpasswd')}\n`;
  } else if (auth === 'token') {
    const t = await startTokenService(dir, 'paddock-test-registry');
    tokenServer = t.server;
    authConfig = `auth:\n  token:\n    realm: ${t.realm}\n    service: paddock-test-registry\n    issuer: paddock-test\n    rootcertbundle: ${t.cert}\n`;
  }
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    `version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n  secret: paddock-test\n${authConfig}`,
  );
  const child = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const host = `127.0.0.1:${port}`;
  try {
    await waitForRegistry(`http://${host}/v2/`, child, () => stderr);
  } catch (err) {
    child.kill('SIGKILL');
    tokenServer?.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    host,
    storage,
    blobFile: (digest) => {
      const hex = digest.slice('sha256:'.length);
      return join(storage, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    },
    manifest: async (name, reference) => {
      const auth = { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
      const res = await fetch(`http://${host}/v2/${name}/manifests/${reference}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json', ...auth } });
      if (!res.ok) throw new Error(`manifest ${name}:${reference}: ${res.status}`);
      return (await res.json()) as { layers: { mediaType: string; digest: string }[] };
    },
    async upload(layoutDir, name, tag, manifestDigest) {
      const blobPath = (digest: string) => join(layoutDir, 'blobs/sha256', digest.slice('sha256:'.length));
      const manifest = readFileSync(blobPath(manifestDigest));
      const { config, layers, mediaType } = JSON.parse(manifest.toString()) as { config: { digest: string }; layers: { digest: string }[]; mediaType: string };
      for (const { digest } of [config, ...layers]) {
        const started = await fetch(`http://${host}/v2/${name}/blobs/uploads/`, { method: 'POST' });
        const location = new URL(started.headers.get('location') ?? '', `http://${host}`);
        location.searchParams.set('digest', digest);
        // Streamed from the file: a root filesystem layer is hundreds of megabytes.
        const body = Readable.toWeb(createReadStream(blobPath(digest))) as ReadableStream<Uint8Array>;
        const put = await fetch(location, {
          method: 'PUT',
          body,
          duplex: 'half',
          headers: { 'content-type': 'application/octet-stream', 'content-length': String(statSync(blobPath(digest)).size) },
        } as RequestInit);
        if (put.status !== 201) throw new Error(`upload of ${digest}: ${put.status} ${await put.text()}`);
      }
      const put = await fetch(`http://${host}/v2/${name}/manifests/${tag}`, { method: 'PUT', body: manifest, headers: { 'content-type': mediaType } });
      if (put.status !== 201) throw new Error(`upload of manifest ${manifestDigest}: ${put.status} ${await put.text()}`);
    },
    async push(layout, tag, name, opts = {}) {
      const creds = auth === 'none' ? [] : ['--dest-creds', `${USER}:${PASSWORD}`];
      await promisify(execFile)('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', ...creds, ...(opts.all ? ['--all'] : []), `oci:${layout}:${tag}`, `docker://${host}/${name}:${tag}`], { timeout: 60_000 });
    },
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      await new Promise((r) => (tokenServer ? tokenServer.close(r) : r(undefined)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---- layers and OCI layouts

export interface TarEntry {
  path: string;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO';
  body?: string | Buffer;
  mode?: number;
  uid?: number;
  gid?: number;
  linkpath?: string;
}

/** A tar of exactly these entries, hostile ones included (node-tar's Header writes each as given). */
export function tarOf(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? 'File';
    const body = type === 'File' ? Buffer.from(e.body ?? '') : Buffer.alloc(0);
    const header = new Header({
      path: e.path,
      type,
      mode: e.mode ?? (type === 'Directory' ? 0o755 : 0o644),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
      size: body.length,
      mtime: new Date('2024-01-02T03:04:05Z'),
      linkpath: e.linkpath ?? '',
      uname: '',
      gname: '',
      devmaj: 0,
      devmin: 0,
    });
    const block = Buffer.alloc(512);
    header.encode(block);
    blocks.push(block, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export interface BuiltImage {
  manifest: { digest: string; size: number; mediaType: string };
  diffIds: string[];
  layerDigests: string[];
}

/** An OCI layout directory to which images are added (`skopeo copy oci:DIR:TAG` reads them by tag). */
export class OciLayout {
  readonly index: { schemaVersion: 2; manifests: object[] } = { schemaVersion: 2, manifests: [] };

  constructor(readonly dir: string) {
    mkdirSync(join(dir, 'blobs/sha256'), { recursive: true });
    writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    if (existsSync(join(dir, 'index.json'))) this.index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'));
  }

  blob(bytes: Buffer): { digest: string; size: number } {
    const digest = digestOf(bytes);
    writeFileSync(join(this.dir, 'blobs/sha256', digest.slice(7)), bytes);
    return { digest, size: bytes.length };
  }

  /** An image of `layers` (tars, bottom first), gzipped unless `compress` is false; tagged `tag` when given. */
  image(layers: Buffer[], opts: { tag?: string; architecture?: string; compress?: boolean; config?: object; diffIds?: string[] } = {}): BuiltImage {
    const architecture = opts.architecture ?? hostArch();
    const diffIds = opts.diffIds ?? layers.map(digestOf);
    const config = this.blob(Buffer.from(JSON.stringify({ architecture, os: 'linux', config: opts.config ?? { Env: ['PATH=/usr/bin:/bin', 'HELLO=world'], WorkingDir: '/work', Cmd: ['/bin/sh'] }, rootfs: { type: 'layers', diff_ids: diffIds } })));
    const compress = opts.compress ?? true;
    const layerDescs = layers.map((l) => ({ mediaType: `application/vnd.oci.image.layer.v1.tar${compress ? '+gzip' : ''}`, ...this.blob(compress ? gzipSync(l) : l) }));
    const manifestBytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: layerDescs }));
    const manifest = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...this.blob(manifestBytes) };
    if (opts.tag) this.tag(opts.tag, manifest);
    return { manifest, diffIds, layerDigests: layerDescs.map((d) => d.digest) };
  }

  /** An index of `images` with their platforms, tagged `tag`. */
  multiArch(tag: string, images: { image: BuiltImage; architecture: string }[]): { digest: string } {
    const bytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: images.map(({ image, architecture }) => ({ ...image.manifest, platform: { os: 'linux', architecture } })) }));
    const desc = { mediaType: 'application/vnd.oci.image.index.v1+json', ...this.blob(bytes) };
    this.tag(tag, desc);
    return desc;
  }

  /**
   * An image of one uncompressed layer that is the tar `file` (a root
   * filesystem, too large to hold in memory), linked into the layout.
   */
  async imageOfTarFile(file: string, opts: { tag: string; config: object }): Promise<BuiltImage> {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
    const digest = `sha256:${hash.digest('hex')}`;
    const target = join(this.dir, 'blobs/sha256', digest.slice(7));
    rmSync(target, { force: true });
    try {
      linkSync(file, target);
    } catch {
      copyFileSync(file, target);
    }
    const size = statSync(file).size;
    const config = this.blob(Buffer.from(JSON.stringify({ architecture: hostArch(), os: 'linux', config: opts.config, rootfs: { type: 'layers', diff_ids: [digest] } })));
    const layer = { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest, size };
    const manifestBytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: [layer] }));
    const manifest = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...this.blob(manifestBytes) };
    this.tag(opts.tag, manifest);
    return { manifest, diffIds: [digest], layerDigests: [digest] };
  }

  tag(tag: string, desc: object): void {
    this.index.manifests.push({ ...desc, annotations: { 'org.opencontainers.image.ref.name': tag } });
    writeFileSync(join(this.dir, 'index.json'), JSON.stringify(this.index));
  }
}

export function hostArch(): string {
  return ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
}
