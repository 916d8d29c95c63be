#!/usr/bin/env node
// The base image for tests: its root filesystem tar built once by mmdebstrap
// into a cache that every test suite and CI run on this machine shares
// (PADDOCK_TEST_CACHE, default /var/tmp/paddock-test-cache), and unpacked
// once into the image store the suites share; found there afterwards. Run as
// a program (`npm test` does, before the suites) it makes both, its progress
// on stderr:
//
//   node tools/testing/base-image.mjs
import { baseImage, buildBaseRootfs, DEFAULT_ID_SHIFT, ImageStore } from '@paddock/runtime';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export function testCacheDir() {
  return process.env.PADDOCK_TEST_CACHE || '/var/tmp/paddock-test-cache';
}

/** Progress as lines on stderr: each new step, and every tenth of a step's way. */
function progressPrinter(write) {
  let last = { message: '', tenth: -1 };
  return (p) => {
    const tenth = p.percent === undefined ? -1 : Math.floor(p.percent / 10);
    const step = p.message.replace(/ \(\d+\/\d+\)$/, '');
    if (step === last.message && tenth === last.tenth) return;
    last = { message: step, tenth };
    write(`base image: ${p.message}${p.percent === undefined ? '' : ` ${Math.floor(p.percent)}%`}\n`);
  };
}

export async function baseImageTar({ cacheDir = testCacheDir(), force = false, quiet = false } = {}) {
  const started = Date.now();
  const res = await buildBaseRootfs({
    cacheDir,
    force,
    onProgress: quiet ? undefined : progressPrinter((s) => process.stderr.write(s)),
  });
  if (!quiet && !res.fromCache) {
    process.stderr.write(`base image: built ${res.tarPath} (${(res.size / 1e6).toFixed(0)} MB) in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
  }
  return res;
}

/**
 * The base image in the image store every test shares (tools/jest/run.mjs
 * names it: PADDOCK_IMAGES_DIR), built and unpacked unless it is there.
 */
export async function sharedBaseImage() {
  const cache = testCacheDir();
  const images = new ImageStore({ dir: process.env.PADDOCK_IMAGES_DIR || join(cache, 'layers'), idShift: DEFAULT_ID_SHIFT });
  let last = '';
  try {
    await images.open();
    return await baseImage(images, {
      cacheDir: process.env.PADDOCK_CACHE_DIR || cache,
      onProgress: (message) => {
        // One line per step (and per tenth of a long one), not one per chunk.
        if (message !== last) process.stderr.write(`${message}\n`);
        last = message;
      },
    });
  } finally {
    await images.close();
  }
}

// Run as a program (`npm test` does, before the suites): the shared base image, ready.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const started = Date.now();
  try {
    const image = await sharedBaseImage();
    process.stderr.write(`test images: base ${image.reference} ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
