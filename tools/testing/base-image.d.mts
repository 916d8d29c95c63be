import type { BaseRootfs, TemplateImage } from '@paddock/runtime';

/** PADDOCK_TEST_CACHE, or /var/tmp/paddock-test-cache. */
export declare function testCacheDir(): string;

/** Builds the base image's tar into the shared test cache, or finds it there; progress goes to stderr unless quiet. */
export declare function baseImageTar(options?: { cacheDir?: string; force?: boolean; quiet?: boolean }): Promise<BaseRootfs>;

/** The base image in the image store every test shares, built and unpacked unless it is there. */
export declare function sharedBaseImage(): Promise<TemplateImage>;
