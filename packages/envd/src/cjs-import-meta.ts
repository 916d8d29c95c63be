// Injected by build.mjs into the CommonJS bundles, where `import.meta.url`
// (in the sources, which are ES modules) is replaced by this: the file URL
// of the bundle, whose path CommonJS gives as __filename.
import { pathToFileURL } from 'node:url';

export const importMetaUrl: string = pathToFileURL(__filename).href;
