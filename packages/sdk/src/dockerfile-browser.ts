// What a browser build of the SDK has in place of dockerfile.ts (mapped by
// the package's `browser` field): the same functions, refusing, so that a
// page's bundle carries no Dockerfile parser and no node:fs.
import type * as NodeDockerfile from './dockerfile.js';
import { InvalidArgumentError } from './errors.js';

function noParser(): never {
  throw new InvalidArgumentError('reading a Dockerfile needs Node; build templates from a Dockerfile with the SDK in Node or with `paddock template build`');
}

export const parseDockerfile: typeof NodeDockerfile.parseDockerfile = () => noParser();
export const readDockerfile: typeof NodeDockerfile.readDockerfile = () => noParser();
