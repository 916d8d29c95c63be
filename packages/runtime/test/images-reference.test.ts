// How image references, registry challenges and index platforms are read:
// the rules Docker's clients follow, so that a name means here what it
// means to `docker pull`.
import { choosePlatform, parseManifest } from '../src/images/manifest.js';
import { isLoopback, parseReference } from '../src/images/reference.js';
import { parseChallenge } from '../src/images/registry-client.js';
import { RuntimeError } from '../src/runtime.js';

const D = `sha256:${'a'.repeat(64)}`;

test.each([
  ['debian', 'docker.io', 'registry-1.docker.io', 'library/debian', 'latest', undefined, 'docker.io/library/debian:latest'],
  ['debian:bookworm', 'docker.io', 'registry-1.docker.io', 'library/debian', 'bookworm', undefined, 'docker.io/library/debian:bookworm'],
  ['user/app:1.0', 'docker.io', 'registry-1.docker.io', 'user/app', '1.0', undefined, 'docker.io/user/app:1.0'],
  ['index.docker.io/library/node:22', 'docker.io', 'registry-1.docker.io', 'library/node', '22', undefined, 'docker.io/library/node:22'],
  [`ghcr.io/org/tool@${D}`, 'ghcr.io', 'ghcr.io', 'org/tool', undefined, D, `ghcr.io/org/tool@${D}`],
  [`ghcr.io/org/tool:v1@${D}`, 'ghcr.io', 'ghcr.io', 'org/tool', 'v1', D, `ghcr.io/org/tool:v1@${D}`],
  ['localhost:5000/x', 'localhost:5000', 'localhost:5000', 'x', 'latest', undefined, 'localhost:5000/x:latest'],
  ['localhost/x/y', 'localhost', 'localhost', 'x/y', 'latest', undefined, 'localhost/x/y:latest'],
  ['127.0.0.1:5000/a/b-c_d.e:t', '127.0.0.1:5000', '127.0.0.1:5000', 'a/b-c_d.e', 't', undefined, '127.0.0.1:5000/a/b-c_d.e:t'],
  ['[::1]:5000/x:y', '[::1]:5000', '[::1]:5000', 'x', 'y', undefined, '[::1]:5000/x:y'],
])('%s', (input, registry, host, repository, tag, digest, canonical) => {
  expect(parseReference(input)).toEqual({ registry, host, repository, tag, digest, canonical });
});

test.each([
  ['', 'it is empty'],
  ['Debian', "'Debian' is not a valid repository name component"],
  ['debian:bad tag', "'bad tag' is not a valid tag"],
  ['x@sha256:abc', "'sha256:abc' is not a sha256 digest"],
  [`x@sha512:${'a'.repeat(128)}`, 'is not a sha256 digest'],
  ['ghcr.io/', 'names no repository'],
  ['a/../b', "'..' is not a valid repository name component"],
])('%j is refused: %s', (input, why) => {
  expect(() => parseReference(input)).toThrow(RuntimeError);
  expect(() => parseReference(input)).toThrow(`image reference '${input}' is invalid: `);
  expect(() => parseReference(input)).toThrow(why);
});

test('loopback registries, and only they, are plain HTTP by default', () => {
  for (const h of ['localhost', 'localhost:5000', '127.0.0.1:5000', '127.1.2.3', '[::1]:5000']) expect(isLoopback(h)).toBe(true);
  for (const h of ['ghcr.io', '10.0.0.1:5000', 'localhost.example.com', '127.0.0.1.nip.io']) expect(isLoopback(h)).toBe(false);
});

test('WWW-Authenticate challenges as Docker Hub, GHCR and distribution send them', () => {
  expect(parseChallenge('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/debian:pull"')).toEqual({
    scheme: 'bearer',
    params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/debian:pull' },
  });
  expect(parseChallenge('Basic realm="paddock \\"test\\""')).toEqual({ scheme: 'basic', params: { realm: 'paddock "test"' } });
  expect(parseChallenge('Bearer realm=https://x/token, service=y')).toEqual({ scheme: 'bearer', params: { realm: 'https://x/token', service: 'y' } });
});

describe('platforms of an index', () => {
  const entry = (architecture: string, variant?: string, os = 'linux') => ({
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    digest: `sha256:${(architecture + (variant ?? '') + os).padEnd(64, '0').replace(/[^a-f0-9]/g, 'f')}`,
    size: 1,
    platform: { os, architecture, ...(variant ? { variant } : {}) },
  });
  const index = (...manifests: object[]) => {
    const doc = parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests })), undefined, 'img');
    if (doc.kind !== 'index') throw new Error('expected an index');
    return doc;
  };

  test('the same variant first, then one without a variant', () => {
    const i = index(entry('arm', 'v6'), entry('arm', 'v7'), entry('arm64', 'v8'), entry('amd64'));
    expect(choosePlatform(i, { os: 'linux', architecture: 'arm', variant: 'v7' }, 'img').platform).toEqual({ os: 'linux', architecture: 'arm', variant: 'v7' });
    expect(choosePlatform(i, { os: 'linux', architecture: 'arm64', variant: 'v8' }, 'img').platform?.architecture).toBe('arm64');
    expect(choosePlatform(index(entry('arm64')), { os: 'linux', architecture: 'arm64', variant: 'v8' }, 'img').platform?.architecture).toBe('arm64');
    expect(choosePlatform(i, { os: 'linux', architecture: 'amd64' }, 'img').platform?.architecture).toBe('amd64');
  });

  test('none for this platform: the error lists what there is, leaving out attestations', () => {
    const i = index(entry('arm64'), entry('s390x'), entry('unknown', undefined, 'unknown'), entry('amd64', undefined, 'windows'));
    expect(() => choosePlatform(i, { os: 'linux', architecture: 'amd64' }, 'img')).toThrow("image 'img' has no linux/amd64 variant (it offers linux/arm64, linux/s390x, windows/amd64)");
  });

  test('schema 1 and unknown documents are refused by name', () => {
    expect(() => parseManifest(Buffer.from('{"schemaVersion":1}'), undefined, 'old')).toThrow("image 'old': Docker schema 1 manifests are not supported");
    expect(() => parseManifest(Buffer.from('nope'), undefined, 'bad')).toThrow("image 'bad': its manifest is not JSON");
    expect(() =>
      parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, config: entry('amd64'), layers: [{ ...entry('amd64'), mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip' }] })), undefined, 'helm'),
    ).toThrow('which is not a tar layer');
  });
});
