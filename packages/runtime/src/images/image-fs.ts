// The image store's native calls (native/image_fs.c): mknod and lsetxattr,
// which Node.js does not offer.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

interface ImageFsNative {
  mknod(path: string, mode: number, major: number, minor: number): void;
  lsetxattr(path: string, name: string, value: string): void;
}

let native: ImageFsNative | undefined;

export function imageFs(): ImageFsNative {
  if (native) return native;
  const file = join(import.meta.dirname, '../../build/Release/image_fs.node');
  if (!existsSync(file)) throw new Error(`the image store's native addon was not found at '${file}'; run the runtime build`);
  return (native = createRequire(import.meta.url)(file) as ImageFsNative);
}
