import type { BaseRootfs } from '@paddock/runtime';

/** PADDOCK_TEST_CACHE, or /var/tmp/paddock-test-cache. */
export declare function testCacheDir(): string;

/** Builds the base image's tar into the shared test cache, or finds it there; progress goes to stderr unless quiet. */
export declare function baseImageTar(options?: { cacheDir?: string; force?: boolean; quiet?: boolean }): Promise<BaseRootfs>;
