// Image references as Docker reads them: `[registry[:port]/]path[:tag][@digest]`,
// where a first component without a dot or a port (and not `localhost`) is
// part of the path on Docker Hub, and a single-component Hub name is in
// `library/`.
import { RuntimeError } from '../runtime.js';

export interface ImageRef {
  /** The registry as people write it: `docker.io`, `ghcr.io`, `127.0.0.1:5000`. */
  registry: string;
  /** Where its API is: Docker Hub's is not at docker.io. */
  host: string;
  repository: string;
  tag?: string;
  digest?: string;
  /** The full form: `docker.io/library/debian:bookworm`. */
  canonical: string;
}

const HUB = 'docker.io';
const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^\w[\w.-]{0,127}$/;
const HOST = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::\d{1,5})?$/;
export const DIGEST = /^sha256:[a-f0-9]{64}$/;

export function parseReference(input: string): ImageRef {
  const bad = (why: string) => new RuntimeError('invalid', `image reference '${input}' is invalid: ${why}`);
  let rest = input.trim();
  if (!rest) throw bad('it is empty');
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw bad(`'${digest}' is not a sha256 digest (sha256: and 64 lowercase hex digits)`);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw bad(`'${tag}' is not a valid tag`);
  }
  const slash = rest.indexOf('/');
  const first = slash < 0 ? '' : rest.slice(0, slash);
  const hasRegistry = slash >= 0 && (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase() || first.startsWith('['));
  let registry = hasRegistry ? first : HUB;
  let repository = hasRegistry ? rest.slice(slash + 1) : rest;
  if (registry === 'index.docker.io' || registry === 'registry-1.docker.io') registry = HUB;
  if (!HOST.test(registry)) throw bad(`'${registry}' is not a registry host`);
  if (registry === HUB && !repository.includes('/')) repository = `library/${repository}`;
  if (!repository) throw bad('it names no repository');
  for (const c of repository.split('/')) {
    if (!COMPONENT.test(c)) throw bad(`'${c}' is not a valid repository name component (lowercase letters, digits and . _ - between them)`);
  }
  if (registry.length + repository.length + 1 > 255) throw bad('the name is longer than 255 characters');
  if (!tag && !digest) tag = 'latest';
  const host = registry === HUB ? 'registry-1.docker.io' : registry;
  const canonical = `${registry}/${repository}${tag ? `:${tag}` : ''}${digest ? `@${digest}` : ''}`;
  return { registry, host, repository, tag, digest, canonical };
}

/** `registry/repository@digest`: the reference of one manifest, whatever tag found it. */
export function digestReference(ref: ImageRef, digest: string): string {
  return `${ref.registry}/${ref.repository}@${digest}`;
}

/** Whether `host` (`name[:port]`) is this machine: plain HTTP is allowed there. */
export function isLoopback(host: string): boolean {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return name === 'localhost' || name === '::1' || /^127(?:\.\d{1,3}){3}$/.test(name);
}
