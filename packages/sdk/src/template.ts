// `Template`: E2B's template builder. A template is a base (an image or a
// template of the server) and steps; the server's build API takes RUN, COPY,
// ENV, WORKDIR and USER, and every other builder method is a RUN of the
// command it stands for. COPY reads local files and so needs Node: its module
// (template-files.ts) is loaded only when a template has one. Reading a
// Dockerfile needs Node too: dockerfile.ts, which a browser build replaces
// with a stand-in that refuses.
import type { ControlClient } from '@paddock/control-client';
import { LogEntry, LogEntryEnd, LogEntryStart, type TemplateBuildStatusResponse } from './build-log.js';
import { checkDuration, resolveConfig, withBoundOptions, type ConnectionOpts } from './config.js';
import { parseDockerfile, readDockerfile } from './dockerfile.js';
import { fromControlError } from './error-mapping.js';
import { BuildError, FileUploadError, InvalidArgumentError, NotFoundError } from './errors.js';
import { controlClient } from './sandbox-api.js';
import { shellCommand, shellQuote } from './shell.js';
import { buildCall, buildStatus, waitForBuild, type BuildInfo, type TemplateTag, type TemplateTagInfo } from './template-build.js';
import type * as TemplateFiles from './template-files.js';
import type { CopyFiles } from './template-files.js';

/** A command whose success means a sandbox of the template is ready. */
export class ReadyCmd {
  readonly #cmd: string;

  constructor(cmd: string) {
    this.#cmd = cmd;
  }

  /** The shell command. */
  getCmd(): string {
    return this.#cmd;
  }
}

/** Ready once something listens on `port` (TCP or UDP). */
export function waitForPort(port: number): ReadyCmd {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new InvalidArgumentError(`port ${port} is not a TCP port`);
  return new ReadyCmd(`[ -n "$(ss -Htuln sport = :${port})" ]`);
}

/** Ready once `url` answers with `statusCode` (default 200). */
export function waitForURL(url: string, statusCode = 200): ReadyCmd {
  return new ReadyCmd(`[ "$(curl -s -o /dev/null -w '%{http_code}' ${shellQuote(url)})" = ${shellQuote(String(statusCode))} ]`);
}

/** Ready once a process of this name runs. */
export function waitForProcess(processName: string): ReadyCmd {
  return new ReadyCmd(`pgrep ${shellQuote(processName)} > /dev/null`);
}

/** Ready once this file exists. */
export function waitForFile(filename: string): ReadyCmd {
  return new ReadyCmd(`[ -f ${shellQuote(filename)} ]`);
}

/** Ready after this many ms (whole seconds, at least one). */
export function waitForTimeout(timeout: number): ReadyCmd {
  checkDuration('timeout', timeout);
  return new ReadyCmd(`sleep ${Math.max(1, Math.floor(timeout / 1000))}`);
}

/** Options of `Template()`. */
export interface TemplateOptions {
  /** Directory that `copy` sources are relative to. Default: the current working directory. */
  fileContextPath?: string;
  /** Glob patterns of paths `copy` leaves out, on top of the context's `.dockerignore`. */
  fileIgnorePatterns?: string[];
}

/** What a build is asked for, besides how to reach the service. */
export interface BasicBuildOptions {
  /** Name of the template (`name:tag` tags the build). `Template.build(t, name)` is the newer form. */
  alias: string;
  /** More tags to point at the build once it succeeds. */
  tags?: string[];
  /** CPUs of the template's sandboxes; the server's default when omitted. */
  cpuCount?: number;
  /** Memory of the template's sandboxes, in MiB; the server's default when omitted. */
  memoryMB?: number;
  /** Run every step, using no cached layer. */
  skipCache?: boolean;
  /** Receives the build's log entries as they come. */
  onBuildLogs?: (logEntry: LogEntry) => void;
  /** Stops following the build (it goes on on the server). */
  signal?: AbortSignal;
}

/** Options of `Template.build` and `Template.buildInBackground`. */
export type BuildOptions = ConnectionOpts & BasicBuildOptions;

/** Options of `Template.getBuildStatus`. */
export type GetBuildStatusOptions = ConnectionOpts & {
  /** Index of the first log entry to return. */
  logsOffset?: number;
  /** Cancels the call. */
  signal?: AbortSignal;
};

/** One copy of `copyItems`: the arguments of one `copy` call. */
export interface CopyItem {
  /** Path or paths relative to the template's `fileContextPath`; globs allowed. */
  src: string | string[];
  /** Path in the template; relative to the working directory of the step. */
  dest: string;
  /** Upload the files even when the server has them already, and run the step without the cache. */
  forceUpload?: true;
  /** Owner of the copied files; the template's current user when omitted. */
  user?: string;
  /** Permission bits of the copied files, e.g. `0o755`. */
  mode?: number;
  /** Copy what symlinks point at instead of the links. Default false. */
  resolveSymlinks?: boolean;
  /** Compress the files on the way to the server. Default true. */
  gzip?: boolean;
}

/** A template with no base yet: pick one. */
export interface TemplateFromImage {
  /** Builds on `debian:{variant}` (default `stable`). */
  fromDebianImage(variant?: string): TemplateBuilder;
  /** Builds on `ubuntu:{variant}` (default `latest`). */
  fromUbuntuImage(variant?: string): TemplateBuilder;
  /** Builds on `fedora:{variant}` (default `latest`). */
  fromFedoraImage(variant?: string): TemplateBuilder;
  /** Builds on `alpine:{variant}` (default `latest`). */
  fromAlpineImage(variant?: string): TemplateBuilder;
  /** Builds on `archlinux:{variant}` (default `latest`). */
  fromArchImage(variant?: string): TemplateBuilder;
  /** Builds on `python:{version}` (default `3`). */
  fromPythonImage(version?: string): TemplateBuilder;
  /** Builds on `node:{variant}` (default `lts`). */
  fromNodeImage(variant?: string): TemplateBuilder;
  /** Builds on `oven/bun:{variant}` (default `latest`). */
  fromBunImage(variant?: string): TemplateBuilder;
  /** E2B's base image, which the server's `base` template stands in for. */
  fromBaseImage(): TemplateBuilder;
  /** Builds on a container image, pulled with `credentials` when given. */
  fromImage(baseImage: string, credentials?: { username: string; password: string }): TemplateBuilder;
  /** Builds on another template of the server (ID or name). */
  fromTemplate(template: string): TemplateBuilder;
  /**
   * Builds what a Dockerfile says: its FROM as the base, and its RUN,
   * COPY/ADD, ENV, ARG, WORKDIR and USER as steps (COPY sources relative to
   * `fileContextPath`). The last CMD/ENTRYPOINT is the start command, with
   * no ready check unless one is set after. Takes the Dockerfile's text, or
   * the path of one. Needs Node.
   */
  fromDockerfile(dockerfileContentOrPath: string): TemplateBuilder;
  /** Builds on an image from AWS ECR, pulled with these credentials. */
  fromAWSRegistry(image: string, credentials: { accessKeyId: string; secretAccessKey: string; region: string }): TemplateBuilder;
  /** Builds on an image from Google's registry, pulled with this service account. */
  fromGCPRegistry(image: string, credentials: { serviceAccountJSON: object | string }): TemplateBuilder;
  /** Builds the whole template without the cache. */
  skipCache(): this;
}

/** A template with a base: add steps, then build it, or end it with a start command. */
export interface TemplateBuilder {
  /** Copies local files (relative to `fileContextPath`) into the template; see {@link CopyItem} for the options. */
  copy(
    src: string | string[],
    dest: string,
    options?: { forceUpload?: true; user?: string; mode?: number; resolveSymlinks?: boolean; gzip?: boolean },
  ): TemplateBuilder;
  /** One `copy` per item. */
  copyItems(items: CopyItem[]): TemplateBuilder;
  /** Removes paths (`rm`), as `user` when given. */
  remove(path: string | string[], options?: { force?: boolean; recursive?: boolean; user?: string }): TemplateBuilder;
  /** Moves `src` to `dest` (`mv`), as `user` when given. */
  rename(src: string, dest: string, options?: { force?: boolean; user?: string }): TemplateBuilder;
  /** Makes directories and their parents (`mkdir -p`), with `mode` and as `user` when given. */
  makeDir(path: string | string[], options?: { mode?: number; user?: string }): TemplateBuilder;
  /** Makes a symlink at `dest` that points to `src` (`ln -s`), as `user` when given. */
  makeSymlink(src: string, dest: string, options?: { user?: string; force?: boolean }): TemplateBuilder;
  /** Runs a shell command, as `user` when given, else as the template's current user. */
  runCmd(command: string, options?: { user?: string }): TemplateBuilder;
  /** Runs the commands one after another (joined with `&&`), as `user` when given. */
  runCmd(commands: string[], options?: { user?: string }): TemplateBuilder;
  /** Runs one command, or several joined with `&&`, as `user` when given. */
  runCmd(commandOrCommands: string | string[], options?: { user?: string }): TemplateBuilder;
  /** Working directory of the later steps and of the sandboxes; made if missing. */
  setWorkdir(workdir: string): TemplateBuilder;
  /** User of the later steps and of the sandboxes; made if missing. */
  setUser(user: string): TemplateBuilder;
  /**
   * `pip install` of `packages`, or of the project in the working directory; as root for the system (`g`, the
   * default).
   */
  pipInstall(packages?: string | string[], options?: { g?: boolean }): TemplateBuilder;
  /** `npm install` of `packages`, or of the project in the working directory; `g` installs globally, as root. */
  npmInstall(packages?: string | string[], options?: { g?: boolean; dev?: boolean }): TemplateBuilder;
  /** `bun install` of `packages`, or of the project in the working directory; `g` installs globally, as root. */
  bunInstall(packages?: string | string[], options?: { g?: boolean; dev?: boolean }): TemplateBuilder;
  /** `apt-get update` and `apt-get install -y`, as root, with no questions asked. */
  aptInstall(packages: string | string[], options?: { noInstallRecommends?: boolean; fixMissing?: boolean }): TemplateBuilder;
  /** `git clone` of `url` into `path` (git's default when omitted); `branch` alone, `depth` for a shallow clone. */
  gitClone(url: string, path?: string, options?: { branch?: string; depth?: number; user?: string }): TemplateBuilder;
  /** Environment variables of the later steps and of the sandboxes. */
  setEnvs(envs: Record<string, string>): TemplateBuilder;
  /** Runs every later step without the cache. */
  skipCache(): this;
  /** The command every sandbox of the template starts with, and the check that it is ready. */
  setStartCmd(startCommand: string, readyCommand: string | ReadyCmd): TemplateFinal;
  /** The check that a sandbox of the template is ready, with no start command. */
  setReadyCmd(readyCommand: string | ReadyCmd): TemplateFinal;
}

/** A template with its start command: ready to build. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface TemplateFinal {}

/** A template at any stage, as the build API takes it. */
export type TemplateClass = TemplateBuilder | TemplateFinal;

interface Step {
  type: 'RUN' | 'COPY' | 'ENV' | 'WORKDIR' | 'USER';
  args: string[];
  force: boolean;
  copy?: { resolveSymlinks: boolean; gzip: boolean; forceUpload: boolean };
}

type Registry =
  | { type: 'registry'; username: string; password: string }
  | { type: 'aws'; awsAccessKeyId: string; awsSecretAccessKey: string; awsRegion: string }
  | { type: 'gcp'; serviceAccountJson: string };

/** The image `fromBaseImage` names; the server builds on its `base` template for it. */
const BASE_IMAGE = 'e2bdev/base';

function list(value: string | string[]): string[] {
  return Array.isArray(value) ? value : [value];
}

function octal(mode: number): string {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new InvalidArgumentError(`mode ${mode} is not a file mode`);
  return mode.toString(8).padStart(4, '0');
}

/** What the Node-only files module is loaded as; undefined until a template with a COPY is built. */
let filesModule: Promise<typeof TemplateFiles> | undefined;

function templateFiles(): Promise<typeof TemplateFiles> {
  filesModule ??= import('./template-files.js').catch((err: unknown) => {
    filesModule = undefined;
    throw new FileUploadError(`the module that packs a COPY's files could not be loaded: ${(err as Error).message}`, { cause: err });
  });
  return filesModule;
}

/** The builder and, as statics, the build API. Make one with `Template()`. */
export class TemplateBase implements TemplateFromImage, TemplateBuilder, TemplateFinal {
  #baseImage: string | undefined;
  #baseTemplate: string | undefined;
  #registry: Registry | undefined;
  #startCmd: string | undefined;
  #readyCmd: string | undefined;
  /** What `fromDockerfile` ignored or left as written, told to `onBuildLogs` when the build starts. */
  readonly #notes: string[] = [];
  #force = false;
  #forceNext = false;
  readonly #steps: Step[] = [];
  readonly #context: string | undefined;
  readonly #ignore: string[];

  constructor(options: TemplateOptions = {}) {
    this.#context = options.fileContextPath;
    this.#ignore = [...(options.fileIgnorePatterns ?? [])];
  }

  // --- the build API ---------------------------------------------------------

  /** Builds a template and waits until it is ready; throws BuildError when a step fails. */
  static build(template: TemplateClass, name: string, options?: Omit<BuildOptions, 'alias'>): Promise<BuildInfo>;
  static build(template: TemplateClass, options: BuildOptions): Promise<BuildInfo>;
  static async build(template: TemplateClass, nameOrOptions: string | BuildOptions, maybeOptions?: Omit<BuildOptions, 'alias'>): Promise<BuildInfo> {
    const { name, options } = buildArgs(nameOrOptions, maybeOptions);
    const control = controlClient(resolveConfig(withBoundOptions(this, options)));
    const log = options.onBuildLogs;
    log?.(new LogEntryStart(new Date(), `Building template ${name}`));
    const info = await asTemplate(template).#start(control, name, options);
    await waitForBuild(control, info.templateId, info.buildId, log, { signal: options.signal });
    log?.(new LogEntryEnd(new Date(), `Template ${name} is built (build ${info.buildId})`));
    return info;
  }

  /** Starts a build and returns at once; follow it with `getBuildStatus`. */
  static buildInBackground(template: TemplateClass, name: string, options?: Omit<BuildOptions, 'alias'>): Promise<BuildInfo>;
  static buildInBackground(template: TemplateClass, options: BuildOptions): Promise<BuildInfo>;
  static async buildInBackground(
    template: TemplateClass,
    nameOrOptions: string | BuildOptions,
    maybeOptions?: Omit<BuildOptions, 'alias'>,
  ): Promise<BuildInfo> {
    const { name, options } = buildArgs(nameOrOptions, maybeOptions);
    return asTemplate(template).#start(controlClient(resolveConfig(withBoundOptions(this, options))), name, options);
  }

  /** Status of a build and its log entries from `logsOffset` on. */
  static getBuildStatus(data: Pick<BuildInfo, 'templateId' | 'buildId'>, options: GetBuildStatusOptions = {}): Promise<TemplateBuildStatusResponse> {
    return buildStatus(controlClient(resolveConfig(withBoundOptions(this, options))), data.templateId, data.buildId, options.logsOffset ?? 0, options);
  }

  /** Whether a template of this name exists. */
  static async exists(name: string, options: ConnectionOpts = {}): Promise<boolean> {
    const control = controlClient(resolveConfig(withBoundOptions(this, options)));
    try {
      await control.getTemplateByAlias(name);
      return true;
    } catch (err) {
      const mapped = fromControlError(err, 'other');
      if (mapped instanceof NotFoundError) return false;
      throw mapped;
    }
  }

  /** `exists` under E2B's former name. */
  static aliasExists(alias: string, options: ConnectionOpts = {}): Promise<boolean> {
    return this.exists(alias, options);
  }

  /** Points tags at the build that `targetName` (`name` or `name:tag`) names. */
  static async assignTags(targetName: string, tags: string | string[], options: ConnectionOpts = {}): Promise<TemplateTagInfo> {
    const control = controlClient(resolveConfig(withBoundOptions(this, options)));
    const assigned = await buildCall(() => control.assignTemplateTags({ target: targetName, tags: list(tags) }));
    return { buildId: assigned.buildID, tags: assigned.tags };
  }

  /** Removes tags from the template `name`; the builds stay. */
  static async removeTags(name: string, tags: string | string[], options: ConnectionOpts = {}): Promise<void> {
    const control = controlClient(resolveConfig(withBoundOptions(this, options)));
    await buildCall(() => control.deleteTemplateTags({ name, tags: list(tags) }));
  }

  /** Tags of a template and the builds they point at. */
  static async getTags(templateId: string, options: ConnectionOpts = {}): Promise<TemplateTag[]> {
    const control = controlClient(resolveConfig(withBoundOptions(this, options)));
    const tags = await buildCall(() => control.listTemplateTags(templateId));
    return tags.map((t) => ({ tag: t.tag, buildId: t.buildID, createdAt: new Date(t.createdAt) }));
  }

  /** The template as a Dockerfile; only for a template on an image. */
  static toDockerfile(template: TemplateClass): string {
    return asTemplate(template).#dockerfile();
  }

  // --- the base --------------------------------------------------------------

  fromDebianImage(variant = 'stable'): TemplateBuilder {
    return this.fromImage(`debian:${variant}`);
  }

  fromUbuntuImage(variant = 'latest'): TemplateBuilder {
    return this.fromImage(`ubuntu:${variant}`);
  }

  fromFedoraImage(variant = 'latest'): TemplateBuilder {
    return this.fromImage(`fedora:${variant}`);
  }

  fromAlpineImage(variant = 'latest'): TemplateBuilder {
    return this.fromImage(`alpine:${variant}`);
  }

  fromArchImage(variant = 'latest'): TemplateBuilder {
    return this.fromImage(`archlinux:${variant}`);
  }

  fromPythonImage(version = '3'): TemplateBuilder {
    return this.fromImage(`python:${version}`);
  }

  fromNodeImage(variant = 'lts'): TemplateBuilder {
    return this.fromImage(`node:${variant}`);
  }

  fromBunImage(variant = 'latest'): TemplateBuilder {
    return this.fromImage(`oven/bun:${variant}`);
  }

  fromBaseImage(): TemplateBuilder {
    return this.fromImage(BASE_IMAGE);
  }

  fromImage(baseImage: string, credentials?: { username: string; password: string }): TemplateBuilder {
    if (credentials && (!credentials.username || !credentials.password)) {
      throw new InvalidArgumentError('registry credentials need both a username and a password');
    }
    return this.#base(baseImage, undefined, credentials && { type: 'registry', ...credentials });
  }

  fromTemplate(template: string): TemplateBuilder {
    return this.#base(undefined, template, undefined);
  }

  fromDockerfile(dockerfileContentOrPath: string): TemplateBuilder {
    const { text, file } = readDockerfile(dockerfileContentOrPath);
    const plan = parseDockerfile(text, { file });
    // E2B's base image is the server's base template either way; as an image it also has a Dockerfile form.
    if ('fromTemplate' in plan.from) this.#base(BASE_IMAGE, undefined, undefined);
    else this.#base(plan.from.fromImage, undefined, undefined);
    for (const step of plan.steps) {
      if (step.type === 'COPY') {
        const [, dest, owner, mode] = step.args;
        if (step.add) this.#notes.push(`${file}:${step.line}: ADD copies '${step.source}' as it is; an archive is not unpacked`);
        // Docker reads a COPY source from the context even when it starts with '/'.
        this.copy(step.source.replace(/^\/+/, '') || '.', dest!, { user: owner, ...(mode ? { mode: parseInt(mode, 8) } : {}) });
      } else {
        this.#step(step.type, step.args);
      }
    }
    if (plan.startCmd !== undefined) this.#startCmd = plan.startCmd;
    if (plan.readyCmd !== undefined) this.#readyCmd = plan.readyCmd;
    this.#notes.push(...plan.notes);
    return this;
  }

  fromAWSRegistry(image: string, credentials: { accessKeyId: string; secretAccessKey: string; region: string }): TemplateBuilder {
    return this.#base(image, undefined, {
      type: 'aws',
      awsAccessKeyId: credentials.accessKeyId,
      awsSecretAccessKey: credentials.secretAccessKey,
      awsRegion: credentials.region,
    });
  }

  fromGCPRegistry(image: string, credentials: { serviceAccountJSON: object | string }): TemplateBuilder {
    const json = credentials.serviceAccountJSON;
    return this.#base(image, undefined, { type: 'gcp', serviceAccountJson: typeof json === 'string' ? json : JSON.stringify(json) });
  }

  /** Runs every later step without the cache; called before a base, the whole build. */
  skipCache(): this {
    this.#forceNext = true;
    return this;
  }

  // --- the steps -------------------------------------------------------------

  copy(
    src: string | string[],
    dest: string,
    options: { forceUpload?: true; user?: string; mode?: number; resolveSymlinks?: boolean; gzip?: boolean } = {},
  ): TemplateBuilder {
    for (const one of list(src)) {
      const normal = one.replace(/\\/g, '/');
      if (normal.startsWith('/') || normal.split('/').includes('..')) {
        throw new InvalidArgumentError(`copy source '${one}' must be a path inside the build context, without '..'`);
      }
      this.#steps.push({
        type: 'COPY',
        args: [one, dest, options.user ?? '', options.mode === undefined ? '' : octal(options.mode)],
        force: options.forceUpload === true || this.#forceNext,
        copy: { resolveSymlinks: options.resolveSymlinks ?? false, gzip: options.gzip ?? true, forceUpload: options.forceUpload === true },
      });
    }
    return this;
  }

  copyItems(items: CopyItem[]): TemplateBuilder {
    for (const { src, dest, ...options } of items) this.copy(src, dest, options);
    return this;
  }

  remove(path: string | string[], options: { force?: boolean; recursive?: boolean; user?: string } = {}): TemplateBuilder {
    const flags = [...(options.recursive ? ['-r'] : []), ...(options.force ? ['-f'] : [])];
    return this.#run(shellCommand(['rm', ...flags, '--', ...list(path)]), options.user);
  }

  rename(src: string, dest: string, options: { force?: boolean; user?: string } = {}): TemplateBuilder {
    return this.#run(shellCommand(['mv', ...(options.force ? ['-f'] : []), '--', src, dest]), options.user);
  }

  makeDir(path: string | string[], options: { mode?: number; user?: string } = {}): TemplateBuilder {
    const mode = options.mode === undefined ? [] : ['-m', octal(options.mode)];
    return this.#run(shellCommand(['mkdir', '-p', ...mode, '--', ...list(path)]), options.user);
  }

  makeSymlink(src: string, dest: string, options: { user?: string; force?: boolean } = {}): TemplateBuilder {
    return this.#run(shellCommand(['ln', '-s', ...(options.force ? ['-f'] : []), '--', src, dest]), options.user);
  }

  runCmd(command: string, options?: { user?: string }): TemplateBuilder;
  runCmd(commands: string[], options?: { user?: string }): TemplateBuilder;
  runCmd(commandOrCommands: string | string[], options?: { user?: string }): TemplateBuilder;
  runCmd(commandOrCommands: string | string[], options: { user?: string } = {}): TemplateBuilder {
    return this.#run(list(commandOrCommands).join(' && '), options.user);
  }

  setWorkdir(workdir: string): TemplateBuilder {
    return this.#step('WORKDIR', [workdir]);
  }

  setUser(user: string): TemplateBuilder {
    return this.#step('USER', [user]);
  }

  /** `pip install` of `packages`, or of the project in the working directory; as root for the system (`g`, the default). */
  pipInstall(packages?: string | string[], options: { g?: boolean } = {}): TemplateBuilder {
    const global = options.g ?? true;
    const words = ['pip', 'install', ...(global ? [] : ['--user']), ...(packages === undefined ? ['.'] : list(packages))];
    return this.#run(shellCommand(words), global ? 'root' : undefined);
  }

  /** `npm install` of `packages`, or of the project in the working directory; `g` installs globally, as root. */
  npmInstall(packages?: string | string[], options: { g?: boolean; dev?: boolean } = {}): TemplateBuilder {
    const words = ['npm', 'install', ...(options.g ? ['-g'] : []), ...(options.dev ? ['--save-dev'] : []), ...(packages === undefined ? [] : list(packages))];
    return this.#run(shellCommand(words), options.g ? 'root' : undefined);
  }

  bunInstall(packages?: string | string[], options: { g?: boolean; dev?: boolean } = {}): TemplateBuilder {
    const words = ['bun', 'install', ...(options.g ? ['-g'] : []), ...(options.dev ? ['--dev'] : []), ...(packages === undefined ? [] : list(packages))];
    return this.#run(shellCommand(words), options.g ? 'root' : undefined);
  }

  /** `apt-get update` and `apt-get install -y`, as root, with no questions asked. */
  aptInstall(packages: string | string[], options: { noInstallRecommends?: boolean; fixMissing?: boolean } = {}): TemplateBuilder {
    const flags = [...(options.noInstallRecommends ? ['--no-install-recommends'] : []), ...(options.fixMissing ? ['--fix-missing'] : [])];
    const install = `DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes ${shellCommand(['apt-get', 'install', '-y', ...flags, ...list(packages)])}`;
    return this.#run(`apt-get update && ${install}`, 'root');
  }

  gitClone(url: string, path?: string, options: { branch?: string; depth?: number; user?: string } = {}): TemplateBuilder {
    const words = ['git', 'clone', url];
    if (options.branch) words.push('--branch', options.branch, '--single-branch');
    if (options.depth !== undefined) words.push('--depth', String(options.depth));
    if (path) words.push(path);
    return this.#run(shellCommand(words), options.user);
  }

  setEnvs(envs: Record<string, string>): TemplateBuilder {
    const pairs = Object.entries(envs);
    return pairs.length === 0 ? this : this.#step('ENV', pairs.flat());
  }

  /** The command every sandbox of the template starts with, and the check that it is ready. */
  setStartCmd(startCommand: string, readyCommand: string | ReadyCmd): TemplateFinal {
    this.#startCmd = startCommand;
    return this.setReadyCmd(readyCommand);
  }

  setReadyCmd(readyCommand: string | ReadyCmd): TemplateFinal {
    this.#readyCmd = typeof readyCommand === 'string' ? readyCommand : readyCommand.getCmd();
    return this;
  }

  // --- internals -------------------------------------------------------------

  #base(image: string | undefined, template: string | undefined, registry: Registry | undefined): TemplateBuilder {
    this.#baseImage = image;
    this.#baseTemplate = template;
    this.#registry = registry;
    if (this.#forceNext) this.#force = true;
    return this;
  }

  #run(command: string, user: string | undefined): TemplateBuilder {
    return this.#step('RUN', user ? [command, user] : [command]);
  }

  #step(type: Step['type'], args: string[]): TemplateBuilder {
    this.#steps.push({ type, args, force: this.#forceNext });
    return this;
  }

  /** Reserves the build, uploads the files of its COPY steps that the server lacks, and starts it. */
  async #start(control: ControlClient, name: string, options: Omit<BuildOptions, 'alias'>): Promise<BuildInfo> {
    if (this.#baseImage === undefined && this.#baseTemplate === undefined) {
      throw new InvalidArgumentError('the template has no base: call fromImage, fromTemplate or another from… method first');
    }
    const log = options.onBuildLogs;
    const callOpts = { signal: options.signal };
    const reserved = await buildCall(() =>
      control.requestTemplateBuild({ name, tags: options.tags, cpuCount: options.cpuCount, memoryMB: options.memoryMB }, callOpts),
    );
    log?.(new LogEntry(new Date(), 'info', `Template ${reserved.templateID}, build ${reserved.buildID}`));
    for (const note of this.#notes) log?.(new LogEntry(new Date(), 'warn', note));
    const steps = await Promise.all(
      this.#steps.map(async ({ type, args, force, copy }) => {
        const step: { type: string; args: string[]; force: boolean; filesHash?: string } = { type, args, force };
        if (copy) step.filesHash = await this.#upload(control, reserved.templateID, args, copy, options);
        return step;
      }),
    );
    const body = {
      steps,
      force: this.#force || options.skipCache === true,
      ...(this.#baseImage !== undefined ? { fromImage: this.#baseImage } : {}),
      ...(this.#baseTemplate !== undefined ? { fromTemplate: this.#baseTemplate } : {}),
      ...(this.#registry !== undefined ? { fromImageRegistry: this.#registry } : {}),
      ...(this.#startCmd !== undefined ? { startCmd: this.#startCmd } : {}),
      ...(this.#readyCmd !== undefined ? { readyCmd: this.#readyCmd } : {}),
    };
    await buildCall(() => control.startTemplateBuild(reserved.templateID, reserved.buildID, body, callOpts));
    return { alias: name, name, tags: reserved.tags, templateId: reserved.templateID, buildId: reserved.buildID };
  }

  /** The files hash of a COPY step, after uploading its files unless the server has them. */
  async #upload(
    control: ControlClient,
    templateId: string,
    [src, dest]: string[],
    copy: NonNullable<Step['copy']>,
    options: Omit<BuildOptions, 'alias'>,
  ): Promise<string> {
    const files = await templateFiles();
    const spec: CopyFiles = {
      context: this.#context,
      src: src!,
      dest: dest!,
      ignore: this.#ignore,
      resolveSymlinks: copy.resolveSymlinks,
    };
    const hash = await files.filesHash(spec);
    const where = await buildCall(() => control.templateFileUpload(templateId, hash, { signal: options.signal }));
    if (where.present && !copy.forceUpload) {
      options.onBuildLogs?.(new LogEntry(new Date(), 'info', `Files of '${src}' are on the server already`));
      return hash;
    }
    if (!where.url) throw new FileUploadError(`the server gave no upload URL for the files of '${src}'`);
    const packed = await files.packFiles(spec, copy.gzip);
    try {
      await control.uploadTemplateFiles(where.url, packed.path, undefined, { signal: options.signal });
    } catch (err) {
      const cause = fromControlError(err, 'other');
      throw new FileUploadError(`the files of '${src}' could not be uploaded: ${cause.message}`, { cause });
    } finally {
      await packed.cleanup();
    }
    options.onBuildLogs?.(new LogEntry(new Date(), 'info', `Uploaded the files of '${src}'`));
    return hash;
  }

  #dockerfile(): string {
    if (this.#baseTemplate !== undefined) throw new BuildError('a template built on another template has no Dockerfile form');
    if (this.#baseImage === undefined) throw new BuildError('the template has no base image');
    const lines = [`FROM ${this.#baseImage}`];
    for (const { type, args } of this.#steps) {
      if (type === 'RUN' || type === 'WORKDIR' || type === 'USER') lines.push(`${type} ${args[0]}`);
      else if (type === 'COPY') lines.push(`COPY ${args[0]} ${args[1]}`);
      else {
        const pairs: string[] = [];
        for (let i = 0; i < args.length; i += 2) pairs.push(`${args[i]}=${args[i + 1]}`);
        lines.push(`ENV ${pairs.join(' ')}`);
      }
    }
    if (this.#startCmd !== undefined) lines.push(`ENTRYPOINT ${this.#startCmd}`);
    return `${lines.join('\n')}\n`;
  }
}

function asTemplate(template: TemplateClass): TemplateBase {
  if (!(template instanceof TemplateBase)) throw new InvalidArgumentError('not a template: make one with Template()');
  return template;
}

function buildArgs(nameOrOptions: string | BuildOptions, maybeOptions: Omit<BuildOptions, 'alias'> | undefined): { name: string; options: Omit<BuildOptions, 'alias'> } {
  const name = typeof nameOrOptions === 'string' ? nameOrOptions : nameOrOptions.alias;
  const options = (typeof nameOrOptions === 'string' ? maybeOptions : nameOrOptions) ?? {};
  if (!name) throw new InvalidArgumentError('a build needs the template name');
  return { name, options };
}

/** `Template()` makes a builder; `Template.build(...)` and the other statics are the build API. */
export type CallableTemplate = typeof TemplateBase & ((options?: TemplateOptions) => TemplateFromImage);

/**
 * `base` as a function that makes builders, with `base`'s statics reached
 * through the prototype chain; an `E2B` client makes one of a subclass that
 * has its options bound.
 */
export function callableTemplate(base: typeof TemplateBase): CallableTemplate {
  const make = (options?: TemplateOptions): TemplateFromImage => new base(options);
  Object.setPrototypeOf(make, base);
  return make as unknown as CallableTemplate;
}

/** Makes a template builder (`Template()`), and holds the build API as statics (`Template.build`). */
export const Template = callableTemplate(TemplateBase);
