#!/usr/bin/env node
// Before the test suites: the base image that every test's sandboxes start
// from, built (mmdebstrap, several minutes the first time on a machine) and
// unpacked into the image store the suites share (tools/jest/run.mjs names
// it). Both are kept in PADDOCK_TEST_CACHE (default
// /var/tmp/paddock-test-cache), so later runs find them at once.
import { baseImage, DEFAULT_ID_SHIFT, ImageStore } from '@paddock/runtime';
import { join } from 'node:path';

const cache = process.env.PADDOCK_TEST_CACHE || '/var/tmp/paddock-test-cache';
const images = new ImageStore({ dir: process.env.PADDOCK_IMAGES_DIR || join(cache, 'layers'), idShift: DEFAULT_ID_SHIFT });
const started = Date.now();
let last = '';
try {
  await images.open();
  const image = await baseImage(images, {
    cacheDir: process.env.PADDOCK_CACHE_DIR || cache,
    onProgress: (message) => {
      // One line per step (and per tenth of a long one), not one per chunk.
      if (message !== last) process.stderr.write(`${message}\n`);
      last = message;
    },
  });
  process.stderr.write(`test images: base ${image.reference} ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
} finally {
  await images.close();
}
