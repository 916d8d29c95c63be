// `paddock template build`: a Dockerfile and its context made into a
// template through the build API (request a build, upload the files of its
// COPY steps the server lacks, start it, follow its log), and the log of a
// build followed to its end.
import { createHash } from 'node:crypto';
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { BuildLogEntry, ControlClient, TemplateBuildInfo, TemplateStep } from '@paddock/control-client';
import { parseDockerfile, type DockerfilePlan } from '@paddock/sdk';
import { BuildContext, type CopyFiles } from './build-context.js';
import { CliError, EXIT, style } from './output.js';

export interface BuildOptions {
  contextDir: string;
  /** Default: `Dockerfile` in the context, else `e2b.Dockerfile`. */
  dockerfile?: string;
  name: string;
  tags?: string[];
  cpuCount?: number;
  memoryMB?: number;
  buildArgs?: Record<string, string>;
  noCache?: boolean;
  /** Replace the start command the Dockerfile's CMD/ENTRYPOINT give. */
  startCmd?: string;
  /** Replace the ready command the Dockerfile's HEALTHCHECK gives. */
  readyCmd?: string;
}

/** A Dockerfile read and the files of its COPY steps found and hashed: everything checked before the server hears of it. */
export interface PreparedBuild {
  plan: DockerfilePlan;
  context: BuildContext;
  /** By step index. */
  files: Map<number, CopyFiles & { source: string }>;
  startCmd?: string;
  readyCmd?: string;
}

/** How long an upload may take; the URL the server signs lives about as long. */
const UPLOAD_TIMEOUT_MS = 10 * 60_000;
/** How often a running build's status is asked for. */
const POLL_MS = 500;
/** Log entries asked for at once. */
const LOG_PAGE = 100;

const sizeOf = (bytes: number) => (bytes < 1024 ? `${bytes} B` : bytes < 1024 ** 2 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`);

/** A path as messages show it: relative to the working directory when it is under it. */
function shownPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

function findDockerfile(contextDir: string, given: string | undefined): string {
  if (given) {
    const path = resolve(given);
    if (!statSync(path, { throwIfNoEntry: false })?.isFile()) throw new CliError(`the Dockerfile '${given}' is not a file`);
    return path;
  }
  const found = ['Dockerfile', 'e2b.Dockerfile'].map((n) => join(contextDir, n)).find((p) => statSync(p, { throwIfNoEntry: false })?.isFile());
  if (!found) throw new CliError(`no Dockerfile (nor e2b.Dockerfile) in ${contextDir}`, EXIT.usage, 'name one with -f/--file');
  return found;
}

/** Reads and checks everything local: the Dockerfile, the ignore file, each COPY source. Throws before anything is sent. */
export async function prepareBuild(opts: BuildOptions, notes: string[]): Promise<PreparedBuild> {
  const contextDir = resolve(opts.contextDir);
  const dockerfile = findDockerfile(contextDir, opts.dockerfile);
  const shown = shownPath(dockerfile);
  const plan = parseDockerfile(readFileSync(dockerfile, 'utf8'), { file: shown, buildArgs: opts.buildArgs });
  notes.push(...plan.notes);
  const context = BuildContext.open(contextDir, dockerfile, shownPath);
  const files = new Map<number, CopyFiles & { source: string }>();
  for (const [i, step] of plan.steps.entries()) {
    if (step.type !== 'COPY') continue;
    const entries = context.collect(step.source, { add: step.add, where: `${shown}:${step.line}`, notes });
    files.set(i, { ...(await context.hash(entries)), source: step.source });
  }
  const startCmd = opts.startCmd ?? plan.startCmd;
  const readyCmd = opts.readyCmd ?? plan.readyCmd;
  return { plan, context, files, ...(startCmd ? { startCmd } : {}), ...(readyCmd ? { readyCmd } : {}) };
}

/** A log entry as a line: the step in brackets, errors in red. */
export function formatEntry(e: BuildLogEntry, stream: NodeJS.WriteStream): string {
  const text = e.level === 'error' ? style.red(e.message, stream) : e.message;
  return e.step ? `${style.dim(`[${e.step}]`, stream)} ${text}\n` : `${text}\n`;
}

/**
 * Reads a build's log, giving each entry to `onEntry`, until the build
 * ends (with `follow`) or the log read so far is all there is. The status
 * returned is the last one read.
 */
export async function followBuild(
  control: ControlClient,
  templateID: string,
  buildID: string,
  opts: { follow: boolean; onEntry: (e: BuildLogEntry) => void },
): Promise<TemplateBuildInfo> {
  let offset = 0;
  for (;;) {
    const status = await control.getTemplateBuildStatus(templateID, buildID, { logsOffset: offset, limit: LOG_PAGE });
    for (const e of status.logEntries) opts.onEntry(e);
    offset += status.logEntries.length;
    if (status.logEntries.length === LOG_PAGE) continue;
    // A build's last entries are written before it is marked ended, so an ended status comes with its whole log.
    // A build still waiting was reserved but never started: nothing will come to follow.
    if (!opts.follow || status.status !== 'building') return status;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** The build request's steps, each COPY with its files' hash. */
function requestSteps(prepared: PreparedBuild): TemplateStep[] {
  return prepared.plan.steps.map((s, i) => {
    const files = prepared.files.get(i);
    return { type: s.type, args: s.args, ...(files ? { filesHash: files.hash } : {}) };
  });
}

/** Uploads the files of each COPY the server does not have yet, each once. */
async function uploadFiles(control: ControlClient, templateID: string, prepared: PreparedBuild, say: (line: string) => void): Promise<void> {
  const done = new Set<string>();
  let tmp: string | undefined;
  try {
    for (const files of prepared.files.values()) {
      if (done.has(files.hash)) continue;
      done.add(files.hash);
      const what = `COPY ${files.source}: ${files.entries.length} ${files.entries.length === 1 ? 'entry' : 'entries'}, ${sizeOf(files.bytes)}`;
      const slot = await control.templateFileUpload(templateID, files.hash);
      if (slot.present || !slot.url) {
        say(`${what}, already on the server`);
        continue;
      }
      tmp ??= mkdtempSync(join(tmpdir(), 'paddock-build-'));
      const archive = join(tmp, `${files.hash}.tar.gz`);
      await prepared.context.archive(files.entries, archive);
      await control.uploadTemplateFiles(slot.url, archive, undefined, { requestTimeoutMs: UPLOAD_TIMEOUT_MS });
      say(`${what}, uploaded (${sizeOf(statSync(archive).size)} compressed)`);
    }
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

export interface BuildResult {
  templateID: string;
  buildID: string;
  names: string[];
  tags: string[];
  status: TemplateBuildInfo;
}

/** `POST /v3/templates`: a build of the template `name`, with what was asked of its sandboxes. */
function reserveBuild(control: ControlClient, opts: { name: string; tags?: string[]; cpuCount?: number; memoryMB?: number }) {
  return control.requestTemplateBuild({
    name: opts.name,
    ...(opts.tags && opts.tags.length > 0 ? { tags: opts.tags } : {}),
    ...(opts.cpuCount !== undefined ? { cpuCount: opts.cpuCount } : {}),
    ...(opts.memoryMB !== undefined ? { memoryMB: opts.memoryMB } : {}),
  });
}

/** Requests, uploads, starts and follows a build; the log goes to `out` as it comes. */
export async function runBuild(control: ControlClient, opts: BuildOptions, prepared: PreparedBuild, out: NodeJS.WriteStream): Promise<BuildResult> {
  const say = (line: string) => out.write(`${line}\n`);
  const reserved = await reserveBuild(control, opts);
  const { templateID, buildID } = reserved;
  say(`building template ${reserved.names.join(', ')} (${templateID}), build ${buildID}`);
  await uploadFiles(control, templateID, prepared, say);
  await control.startTemplateBuild(templateID, buildID, {
    ...prepared.plan.from,
    steps: requestSteps(prepared),
    ...(prepared.startCmd ? { startCmd: prepared.startCmd } : {}),
    ...(prepared.readyCmd ? { readyCmd: prepared.readyCmd } : {}),
    ...(opts.noCache ? { force: true } : {}),
  });
  const status = await followBuild(control, templateID, buildID, { follow: true, onEntry: (e) => out.write(formatEntry(e, out)) });
  return { templateID, buildID, names: reserved.names, tags: reserved.tags, status };
}

/**
 * `paddock template import`: an image archive (`docker save`, or an OCI
 * layout as a tar) uploaded unless the server has it, and a build from it
 * followed to its end.
 */
export async function importArchive(
  control: ControlClient,
  opts: { archive: string; name: string; tags?: string[]; cpuCount?: number; memoryMB?: number },
  out: NodeJS.WriteStream,
): Promise<BuildResult> {
  const say = (line: string) => out.write(`${line}\n`);
  const stat = statSync(opts.archive, { throwIfNoEntry: false });
  if (!stat?.isFile()) throw new CliError(`the image archive '${opts.archive}' is not a file`);
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(opts.archive)) hash.update(chunk as Buffer);
  const filesHash = hash.digest('hex');
  const reserved = await reserveBuild(control, opts);
  const { templateID, buildID } = reserved;
  say(`importing ${shownPath(resolve(opts.archive))} (${sizeOf(stat.size)}) as template ${reserved.names.join(', ')} (${templateID}), build ${buildID}`);
  const slot = await control.templateFileUpload(templateID, filesHash);
  if (slot.present || !slot.url) say('the archive is on the server already');
  else {
    await control.uploadTemplateFiles(slot.url, opts.archive, undefined, { requestTimeoutMs: UPLOAD_TIMEOUT_MS });
    say('uploaded');
  }
  await control.startTemplateBuild(templateID, buildID, { fromImageArchive: filesHash });
  const status = await followBuild(control, templateID, buildID, { follow: true, onEntry: (e) => out.write(formatEntry(e, out)) });
  return { templateID, buildID, names: reserved.names, tags: reserved.tags, status };
}

/** Why a build failed, as one line. */
export function failure(buildID: string, status: TemplateBuildInfo): string {
  const reason = status.reason;
  return `build ${buildID} failed${reason?.step ? ` at step ${reason.step}` : ''}: ${reason?.message ?? 'no reason given'}`;
}
