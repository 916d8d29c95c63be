// What a browser build of the SDK has in place of template-files.ts (mapped
// by the package's `browser` field): the same functions, refusing, since a
// browser has no local files to COPY. Every other template step works there.
import type * as NodeFiles from './template-files.js';
import { FileUploadError } from './errors.js';

function noFiles(): never {
  throw new FileUploadError('a template COPY reads local files, which needs Node; build templates with copy steps from Node');
}

export const copyEntries: typeof NodeFiles.copyEntries = async () => noFiles();
export const filesHash: typeof NodeFiles.filesHash = async () => noFiles();
export const packFiles: typeof NodeFiles.packFiles = async () => noFiles();
