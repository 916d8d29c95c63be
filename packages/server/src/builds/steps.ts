// What a build is asked to do (the body of POST /v2/templates/{id}/builds/
// {buildID}), checked before anything runs, and the keys its layers are
// cached by.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { TemplateConfig } from '@paddock/runtime';
import { badRequest } from '../errors.js';
import { FILES_HASH, type BuildFiles } from './build-files.js';

export interface BuildStep {
  type: string;
  args?: string[];
  filesHash?: string;
  force?: boolean;
}

export interface BuildRequest {
  fromImage?: string;
  fromTemplate?: string;
  fromImageRegistry?: { type: string; username?: string; password?: string };
  fromImageArchive?: string;
  force?: boolean;
  steps?: BuildStep[];
  startCmd?: string;
  readyCmd?: string;
}

/** Where a build starts: an image from a registry, or a template of this server. */
export type BuildSource =
  | { kind: 'image'; reference: string; auth?: { username: string; password: string } }
  | { kind: 'archive'; filesHash: string }
  | { kind: 'template'; ref: string }
  /** The base template's image made again (`paddock template rebuild base`). */
  | { kind: 'base' };

/** A step as the builder runs it. */
export type Step =
  | { type: 'RUN'; command: string; user?: string }
  | { type: 'COPY'; source: string; dest: string; owner?: string; mode?: string; filesHash: string }
  | { type: 'ENV'; vars: Array<[string, string]> }
  | { type: 'WORKDIR'; path: string }
  | { type: 'USER'; user: string };

export interface BuildPlan {
  source: BuildSource;
  steps: Array<Step & { force: boolean; number: number }>;
  force: boolean;
  startCmd: string | null;
  readyCmd: string | null;
}

/**
 * The SDKs' default image (`Template().fromBaseImage()`) is E2B's base,
 * which this server's `base` template stands in for.
 */
const E2B_BASE_IMAGES = new Set(['e2bdev/base', 'e2bdev/base:latest', 'docker.io/e2bdev/base', 'docker.io/e2bdev/base:latest']);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const USER_NAME = /^[a-z_][a-z0-9_.-]*\$?$/i;
const OCTAL_MODE = /^0?[0-7]{3,4}$/;
/** A COPY's owner part: a name, or a numeric id (the files may belong to ids with no name). */
const OWNER_PART = /^[a-z_][a-z0-9_.-]*\$?$|^\d{1,5}$/i;

/** The part of a COPY source before its first glob character: what the archive's entries are under. */
export function copySource(src: string): string {
  const parts = src.split('/');
  const fixed: string[] = [];
  for (const part of parts) {
    if (/[*?[\]{}]/.test(part)) break;
    fixed.push(part);
  }
  const joined = fixed.join('/');
  return joined === '' ? '.' : joined;
}

function checkStep(raw: BuildStep, number: number, files: BuildFiles): Step {
  const where = `step ${number} (${String(raw.type)})`;
  const args = raw.args ?? [];
  switch (raw.type) {
    case 'RUN': {
      const command = args[0]?.trim();
      if (!command) throw badRequest(`${where}: the command is empty`);
      const user = args[1] || undefined;
      if (user !== undefined && !USER_NAME.test(user)) throw badRequest(`${where}: '${user}' is not a user name`);
      return { type: 'RUN', command: args[0]!, ...(user ? { user } : {}) };
    }
    case 'COPY': {
      const [src, dest, owner, mode] = args;
      if (!src || !dest) throw badRequest(`${where}: needs a source and a destination`);
      const source = posix.normalize(copySource(src));
      if (source.startsWith('../') || source === '..' || posix.isAbsolute(source)) throw badRequest(`${where}: source '${src}' is outside the build context`);
      if (mode && !OCTAL_MODE.test(mode)) throw badRequest(`${where}: mode '${mode}' is not an octal file mode`);
      if (owner && (owner.split(':').length > 2 || !owner.split(':').every((p) => OWNER_PART.test(p)))) throw badRequest(`${where}: owner '${owner}' is not user[:group] (names or numeric ids)`);
      if (!raw.filesHash) throw badRequest(`${where}: filesHash is required`);
      if (!FILES_HASH.test(raw.filesHash)) throw badRequest(`${where}: filesHash '${raw.filesHash}' is not a sha256 in hex`);
      if (!files.has(raw.filesHash)) throw badRequest(`${where}: the files of '${src}' (hash ${raw.filesHash}) were never uploaded`);
      return { type: 'COPY', source, dest, filesHash: raw.filesHash, ...(owner ? { owner } : {}), ...(mode ? { mode } : {}) };
    }
    case 'ENV': {
      if (args.length === 0 || args.length % 2 !== 0) throw badRequest(`${where}: needs pairs of name and value`);
      const vars: Array<[string, string]> = [];
      for (let i = 0; i < args.length; i += 2) {
        if (!ENV_NAME.test(args[i]!)) throw badRequest(`${where}: '${args[i]}' is not an environment variable name`);
        vars.push([args[i]!, args[i + 1]!]);
      }
      return { type: 'ENV', vars };
    }
    case 'WORKDIR': {
      const path = args[0]?.trim();
      if (!path) throw badRequest(`${where}: needs a path`);
      return { type: 'WORKDIR', path };
    }
    case 'USER': {
      const user = args[0]?.trim();
      if (!user || !USER_NAME.test(user)) throw badRequest(`${where}: '${args[0] ?? ''}' is not a user name`);
      return { type: 'USER', user };
    }
    default:
      throw badRequest(`${where}: unknown step type; the types are RUN, COPY, ENV, WORKDIR and USER`);
  }
}

/** Checks a build request whole; a 400 naming the first thing wrong. */
export function planBuild(req: BuildRequest, files: BuildFiles): BuildPlan {
  const given = (['fromImage', 'fromTemplate', 'fromImageArchive'] as const).filter((k) => req[k]);
  if (given.length > 1) throw badRequest(`give one of fromImage, fromTemplate and fromImageArchive, not ${given.join(' and ')}`);
  let source: BuildSource;
  if (req.fromImageArchive) {
    if (!FILES_HASH.test(req.fromImageArchive)) throw badRequest(`fromImageArchive '${req.fromImageArchive}' is not a files hash (a sha256 in hex)`);
    if (!files.has(req.fromImageArchive)) throw badRequest(`the image archive ${req.fromImageArchive} was never uploaded`);
    source = { kind: 'archive', filesHash: req.fromImageArchive };
  } else if (req.fromTemplate) {
    source = { kind: 'template', ref: req.fromTemplate };
  } else if (req.fromImage) {
    const reg = req.fromImageRegistry;
    if (reg && reg.type !== 'registry') throw badRequest(`fromImageRegistry of type '${reg.type}' is not supported; use type 'registry' with a username and password`);
    if (reg && (!reg.username || !reg.password)) throw badRequest('fromImageRegistry needs a username and a password');
    source = E2B_BASE_IMAGES.has(req.fromImage)
      ? { kind: 'template', ref: 'base' }
      : { kind: 'image', reference: req.fromImage, ...(reg ? { auth: { username: reg.username!, password: reg.password! } } : {}) };
  } else {
    throw badRequest('a build needs fromImage, fromTemplate or fromImageArchive');
  }
  const steps = (req.steps ?? []).map((s, i) => ({ ...checkStep(s, i + 1, files), force: s.force === true, number: i + 1 }));
  return { source, steps, force: req.force === true, startCmd: req.startCmd || null, readyCmd: req.readyCmd || null };
}

/** The key of what a layer step makes: its parent, the step, and the config it runs with. */
export function stepKey(parentKey: string, step: Step, config: TemplateConfig): string {
  return createHash('sha256').update(JSON.stringify([parentKey, step, config])).digest('hex');
}

/** A runtime template id for a cache key (63 characters at most). */
export const cacheTemplateId = (key: string) => `c-${key.slice(0, 60)}`;
