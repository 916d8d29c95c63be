// Templates as the control API presents them: the base template and the
// snapshots taken from sandboxes, with their names, builds and tags.
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { BASE_TEMPLATE_ID, DEFAULT_LIMITS, envdVersion, type Runtime } from '@paddock/runtime';
import type { Builder } from './builds/builder.js';
import type { BuildFiles } from './builds/build-files.js';
import { planBuild, type BuildRequest } from './builds/steps.js';
import { ApiError, badRequest, conflict, notFound, toApiError } from './errors.js';
import { readPage, windowOf, type Page } from './pagination.js';
import { scopeOf, type Caller } from './auth.js';
import { inScope, type BuildLogEntry, type BuildRecord, type LogLevel, type SandboxRepository, type TemplateRecord, type TemplateRepository, type TemplateViewer } from './store/repositories.js';

const iso = (ms: number) => new Date(ms).toISOString();
// Templates name no user that made them: keys belong to teams, not people.
const OWNER = { id: '00000000-0000-4000-8000-000000000000', email: null };
const TAG = /^[a-z0-9][a-z0-9._-]{0,127}$/i;
/** A template's name: lowercase letters, digits, `-`, `_`, `.` and `/` (a namespace), as E2B's names are. */
const NAME = /^[a-z0-9][a-z0-9._/-]{0,127}$/;
/** The tag a build gets when it is asked for none. */
export const DEFAULT_TAG = 'default';

const logEntry = (e: BuildLogEntry) => ({ timestamp: iso(e.ts), level: e.level, message: e.message, ...(e.step ? { step: e.step } : {}) });
const LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];
/** How long a status answer of a running build waits for its end, ms. */
const STATUS_HOLD_MS = 1000;

/** The levels at or above `level`. */
const levelsFrom = (level: LogLevel | undefined) => (level ? LEVELS.slice(LEVELS.indexOf(level)) : undefined);

/** The build sandboxes of a template start from: the tag's, else the newest ready one. */
export function readyBuild(t: TemplateRecord, tagBuildId?: string): BuildRecord | undefined {
  return tagBuildId ? t.builds.find((b) => b.id === tagBuildId) : t.builds.find((b) => b.status === 'ready');
}

export interface BuildServices {
  builder: Builder;
  files: BuildFiles;
}

export class Templates {
  private builds: BuildServices | undefined;
  private readonly removedListeners: Array<() => void> = [];

  constructor(
    private readonly records: TemplateRepository,
    private readonly runtime: Runtime,
    private readonly sandboxes: Pick<SandboxRepository, 'list'>,
  ) {}

  /** Calls `listener` after a template is deleted. */
  onRemoved(listener: () => void): void {
    this.removedListeners.push(listener);
  }

  /** Turns on the build API (the server gives it once its builder runs). */
  enableBuilds(services: BuildServices): void {
    this.builds = services;
  }

  private buildServices(): BuildServices {
    if (!this.builds) throw new ApiError(503, 'template builds are not running on this server');
    return this.builds;
  }

  /**
   * The runtime template that sandboxes of `ref` (an id, a name, or
   * `name:tag`) start from, with the build it comes from.
   */
  async startable(ref: string, viewer: TemplateViewer): Promise<{ template: TemplateRecord; build: BuildRecord; runtimeTemplateId: string }> {
    const t = await this.records.resolve(ref, viewer);
    if (!t) throw notFound(`template '${ref}' not found`);
    const colon = ref.lastIndexOf(':');
    const tag = colon > 0 && t.id !== ref && !t.names.includes(ref) ? await this.records.tag(t.id, ref.slice(colon + 1)) : undefined;
    const build = readyBuild(t, tag?.buildId);
    if (!build || build.status !== 'ready') {
      const latest = t.builds[0];
      throw badRequest(`template '${ref}' has no ready build${latest ? ` (its latest build ${latest.id} is ${latest.status})` : ''}`);
    }
    return { template: t, build, runtimeTemplateId: build.runtimeTemplateId ?? t.id };
  }

  /** `POST /v3/templates`: a new build, waiting for its steps, of the template named (made if new). */
  async requestBuild(caller: Caller, body: { name?: string; alias?: string; tags?: string[]; cpuCount?: number; memoryMB?: number }) {
    this.buildServices();
    if (caller.teamId === null) throw new ApiError(403, 'the admin credential belongs to no team and builds no templates; use an API key of a team');
    const full = body.name ?? body.alias;
    if (!full) throw badRequest('name is required');
    const colon = full.indexOf(':');
    const name = colon >= 0 ? full.slice(0, colon) : full;
    if (!NAME.test(name)) throw badRequest(`name '${name}' may use lowercase letters, digits, '.', '_', '-' and '/', up to 128 characters`);
    const tags = [...new Set([...(colon >= 0 ? [full.slice(colon + 1)] : []), ...(body.tags ?? [])])];
    for (const tag of tags) if (!TAG.test(tag)) throw badRequest(`tag '${tag}' may use letters, digits, '.', '_' and '-', up to 128 characters`);
    if (tags.length === 0) tags.push(DEFAULT_TAG);
    const cpuCount = body.cpuCount ?? DEFAULT_LIMITS.cpuCount;
    const memoryMB = body.memoryMB ?? DEFAULT_LIMITS.memoryMB;
    const { template, build } = await this.records.newBuild({
      teamId: caller.teamId,
      templateId: randomUUID().replaceAll('-', '').slice(0, 20),
      buildId: randomUUID(),
      name,
      tags,
      cpuCount,
      memoryMB,
      diskSizeMB: DEFAULT_LIMITS.diskSizeMB,
      envdVersion,
    });
    return { templateID: template.id, buildID: build.id, public: template.public, names: template.names, aliases: template.names, tags };
  }

  /** `GET /templates/{id}/files/{hash}`: whether the files are here, else where to upload them. */
  async fileUpload(caller: Caller, ref: string, hash: string, baseUrl: string) {
    const { files } = this.buildServices();
    const t = await this.require(caller, ref, 'own');
    if (files.has(hash)) return { present: true };
    return { present: false, url: `${baseUrl}/templates/${encodeURIComponent(t.id)}/files/${hash}/upload?${files.sign(t.id, hash)}` };
  }

  /** An upload to a URL that `fileUpload` signed. */
  async receiveFiles(templateId: string, hash: string, query: { expires?: string; signature?: string }, body: Readable): Promise<void> {
    const { files } = this.buildServices();
    const refused = files.verify(templateId, hash, query);
    if (refused) {
      body.resume();
      throw new ApiError(403, refused);
    }
    await files.receive(hash, body);
  }

  /** `POST /v2/templates/{id}/builds/{buildID}`: checks the steps, then runs the build in the background. */
  async startBuild(caller: Caller, ref: string, buildId: string, body: BuildRequest): Promise<void> {
    const { builder, files } = this.buildServices();
    const t = await this.require(caller, ref, 'own');
    const b = t.builds.find((x) => x.id === buildId);
    if (!b) throw notFound(`template '${t.id}' has no build '${buildId}'`);
    const plan = planBuild(body, files);
    if (plan.source.kind === 'template') {
      const source = await this.records.resolve(plan.source.ref, { scope: { teamId: t.teamId }, publicToo: true });
      if (source?.id === t.id) throw badRequest(`template '${plan.source.ref}' cannot be built from itself`);
    }
    await this.records.startBuild(b.id);
    builder.enqueue({ buildId: b.id, templateId: t.id, teamId: t.teamId, plan, limits: { cpuCount: b.cpuCount, memoryMB: b.memoryMB, diskSizeMB: b.diskSizeMB } });
  }

  /** Creates the record of the base template on first start: public, of the team `teamOf` gives (the default team). */
  async ensureBase(teamOf: () => Promise<string>): Promise<void> {
    if (await this.records.get(BASE_TEMPLATE_ID)) return;
    const t = await this.runtime.getTemplate(BASE_TEMPLATE_ID);
    if (!t) throw new Error('the runtime has no base template; prepare() it first');
    await this.records.insert({
      id: BASE_TEMPLATE_ID,
      teamId: await teamOf(),
      kind: 'base',
      public: true,
      names: [BASE_TEMPLATE_ID],
      cpuCount: t.limits.cpuCount,
      memoryMB: t.limits.memoryMB,
      diskSizeMB: t.limits.diskSizeMB,
      envdVersion,
    });
  }

  /**
   * A template the caller may read (`'read'`: its team's, and public ones)
   * or change (`'own'`: its team's only), or 404: another team's is answered
   * exactly as one that does not exist.
   */
  private async require(caller: Caller, ref: string, use: 'read' | 'own'): Promise<TemplateRecord> {
    const t = await this.records.resolve(ref, { scope: scopeOf(caller), publicToo: use === 'read' });
    if (!t) throw notFound(`template '${ref}' not found`);
    return t;
  }

  private build(b: BuildRecord) {
    return {
      buildID: b.id,
      status: b.status,
      createdAt: iso(b.createdAt),
      updatedAt: iso(b.updatedAt),
      ...(b.finishedAt ? { finishedAt: iso(b.finishedAt) } : {}),
      cpuCount: b.cpuCount,
      memoryMB: b.memoryMB,
      diskSizeMB: b.diskSizeMB,
      envdVersion: b.envdVersion,
    };
  }

  private summary(t: TemplateRecord) {
    const b = t.builds[0]!;
    return {
      templateID: t.id,
      buildID: b.id,
      cpuCount: b.cpuCount,
      memoryMB: b.memoryMB,
      diskSizeMB: b.diskSizeMB,
      public: t.public,
      aliases: t.names,
      names: t.names,
      createdAt: iso(t.createdAt),
      updatedAt: iso(t.updatedAt),
      createdBy: OWNER,
      lastSpawnedAt: t.lastSpawnedAt === null ? null : iso(t.lastSpawnedAt),
      spawnCount: t.spawnCount,
      buildCount: t.builds.length,
      envdVersion: b.envdVersion,
      buildStatus: b.status,
    };
  }

  async list(caller: Caller) {
    return (await this.records.list({ scope: scopeOf(caller), publicToo: true })).map((t) => this.summary(t));
  }

  /** The template and one page of its builds, newest first. */
  async withBuilds(caller: Caller, ref: string, q: { limit?: number; nextToken?: string }) {
    const t = await this.require(caller, ref, 'read');
    const builds = await readPage(q, (w) => windowOf(t.builds, w, (b) => ({ key: b.createdAt, id: b.id }), 'desc'), (b) => ({ key: b.createdAt, id: b.id }));
    return {
      body: {
        templateID: t.id,
        public: t.public,
        aliases: t.names,
        names: t.names,
        createdAt: iso(t.createdAt),
        updatedAt: iso(t.updatedAt),
        lastSpawnedAt: t.lastSpawnedAt === null ? null : iso(t.lastSpawnedAt),
        spawnCount: t.spawnCount,
        builds: builds.items.map((b) => this.build(b)),
      },
      nextToken: builds.nextToken,
    };
  }

  async remove(caller: Caller, ref: string): Promise<void> {
    const t = await this.require(caller, ref, 'own');
    if (t.kind === 'base') throw conflict(`template '${t.id}' is built in and cannot be deleted`);
    if (t.builds.some((b) => b.status === 'building')) throw conflict(`template '${t.id}' has a build under way`);
    const users = await this.sandboxes.list({ scope: 'all', states: ['running', 'paused'], templateIds: [t.id], order: 'asc', limit: 5 });
    if (users.length) {
      // Sandboxes of other teams (a public template's users) are counted, not named.
      const named = users.filter((u) => inScope(scopeOf(caller), u.teamId)).map((u) => u.id);
      const others = users.length - named.length;
      const ids = [...named, ...(others ? [`${others} of other teams`] : [])].join(', ') + (users.length === 5 ? ' and maybe more' : '');
      throw conflict(`template '${t.id}' is used by ${users.length > 1 ? `sandboxes ${ids} (kill them first)` : `sandbox ${ids} (kill it first)`}`);
    }
    // A built template's files are layers of the build cache, which other builds may share; a snapshot's are its own.
    if (t.kind === 'snapshot') {
      await this.runtime.deleteTemplate(t.id).catch((err: unknown) => {
        throw toApiError(err);
      });
    }
    await this.records.remove(t.id);
    for (const listener of this.removedListeners) listener();
  }

  async setPublic(caller: Caller, ref: string, isPublic: boolean | undefined) {
    const t = await this.require(caller, ref, 'own');
    if (isPublic !== undefined) await this.records.setPublic(t.id, isPublic);
    return { names: t.names };
  }

  async byAlias(caller: Caller, alias: string) {
    const t = await this.records.byName(alias, { scope: scopeOf(caller), publicToo: true });
    if (!t) throw notFound(`no template is named '${alias}'`);
    return { templateID: t.id, public: t.public };
  }

  async tags(caller: Caller, ref: string) {
    const t = await this.require(caller, ref, 'read');
    return (await this.records.tags(t.id)).map((x) => ({ tag: x.tag, buildID: x.buildId, createdAt: iso(x.createdAt) }));
  }

  /** Tags the build that `target` (`name` or `name:tag`) points at. */
  async assignTags(caller: Caller, target: string, tags: string[]) {
    if (tags.length === 0) throw badRequest('tags must name at least one tag');
    for (const tag of tags) if (!TAG.test(tag)) throw badRequest(`tag '${tag}' may use letters, digits, '.', '_' and '-', up to 128 characters`);
    const colon = target.lastIndexOf(':');
    const name = colon > 0 ? target.slice(0, colon) : target;
    const t = await this.require(caller, name, 'own');
    const fromTag = colon > 0 ? await this.records.tag(t.id, target.slice(colon + 1)) : undefined;
    if (colon > 0 && !fromTag) throw notFound(`template '${name}' has no tag '${target.slice(colon + 1)}'`);
    const buildId = fromTag?.buildId ?? t.builds[0]!.id;
    await this.records.assignTags(t.id, buildId, tags);
    return { tags, buildID: buildId };
  }

  async deleteTags(caller: Caller, name: string, tags: string[]) {
    const t = await this.require(caller, name, 'own');
    const { missing } = await this.records.deleteTags(t.id, tags);
    if (missing.length) throw notFound(`template '${name}' has no tag ${missing.map((m) => `'${m}'`).join(', ')}`);
  }

  /** A build of a template of the caller's team (a public template's builds and their logs stay its team's). */
  private async requireBuild(caller: Caller, ref: string, buildId: string): Promise<{ t: TemplateRecord; b: BuildRecord }> {
    const t = await this.require(caller, ref, 'own');
    const b = t.builds.find((x) => x.id === buildId);
    if (!b) throw notFound(`template '${t.id}' has no build '${buildId}'`);
    return { t, b };
  }

  /** `POST /templates/{id}/rebuild`: the base template's image made again, as a build of it. */
  async rebuild(caller: Caller, ref: string) {
    const { builder } = this.buildServices();
    const t = await this.require(caller, ref, 'own');
    if (t.kind !== 'base') throw badRequest(`template '${ref}' is not the base template; make it again with the build API`);
    const current = readyBuild(t) ?? t.builds[0]!;
    const build = await this.records.addBuild(t.id, {
      buildId: randomUUID(),
      tags: [],
      cpuCount: current.cpuCount,
      memoryMB: current.memoryMB,
      diskSizeMB: current.diskSizeMB,
      envdVersion,
    });
    await this.records.startBuild(build.id);
    builder.enqueue({
      buildId: build.id,
      templateId: t.id,
      teamId: t.teamId,
      plan: { source: { kind: 'base' }, steps: [], force: true, startCmd: null, readyCmd: null },
      limits: { cpuCount: build.cpuCount, memoryMB: build.memoryMB, diskSizeMB: build.diskSizeMB },
    });
    return { templateID: t.id, buildID: build.id, public: t.public, names: t.names, aliases: t.names, tags: [] };
  }

  /** A build's status and its log from `logsOffset` on (at most `limit` entries, of `level` and above). */
  async buildStatus(caller: Caller, ref: string, buildId: string, q: { logsOffset?: number; limit?: number; level?: LogLevel } = {}) {
    let { t, b } = await this.requireBuild(caller, ref, buildId);
    const page = { offset: q.logsOffset ?? 0, limit: q.limit ?? 100, levels: levelsFrom(q.level) };
    // Clients poll this (the SDKs sleep 200 ms after each answer). The
    // answer of a running build is held until the build ends, so that it is
    // there the moment the build is ready, or for STATUS_HOLD_MS, and then
    // carries the entries written meanwhile. Held so even with entries to
    // give: an answer at once, when logs flow, sent the client to sleep
    // through the build's end most of the time (a 3-step build was learnt of
    // as ready 0.1-0.2 s after it was); held, the client's request waits
    // most of the time, and its sleep falls while the build runs on.
    const deadline = Date.now() + STATUS_HOLD_MS;
    while (b.status === 'building' && this.builds && Date.now() < deadline) {
      const heldHere = await this.builds.builder.untilNews(b.id, deadline - Date.now());
      ({ t, b } = await this.requireBuild(caller, ref, buildId));
      // A build this server does not run (one a stop cut off) gives no news to wait for.
      if (!heldHere) break;
    }
    const entries = await this.records.buildLogs(b.id, page);
    return {
      logs: entries.map((e) => `${iso(e.ts)} ${e.message}`),
      logEntries: entries.map(logEntry),
      templateID: t.id,
      buildID: b.id,
      status: b.status,
      ...(b.reason
        ? { reason: { message: b.reason.message, ...(b.reason.step ? { step: b.reason.step } : {}), logEntries: (b.reason.logEntries ?? []).map(logEntry) } }
        : {}),
    };
  }

  /** A build's log from `cursor` (a time, ms) on, forward (oldest first) or backward. */
  async buildLogs(caller: Caller, ref: string, buildId: string, q: { cursor?: number; limit?: number; direction?: 'forward' | 'backward'; level?: LogLevel } = {}) {
    const { b } = await this.requireBuild(caller, ref, buildId);
    const all = await this.records.buildLogs(b.id, { offset: 0, limit: -1, levels: levelsFrom(q.level) });
    const limit = q.limit ?? 100;
    const picked =
      q.direction === 'backward'
        ? all.filter((e) => q.cursor === undefined || e.ts <= q.cursor).slice(-limit).reverse()
        : all.filter((e) => q.cursor === undefined || e.ts >= q.cursor).slice(0, limit);
    return { logs: picked.map(logEntry) };
  }

  async snapshots(caller: Caller, q: { sandboxID?: string; name?: string; limit?: number; nextToken?: string }): Promise<Page<{ snapshotID: string; names: string[] }>> {
    const page = await readPage(
      q,
      (w) => this.records.listSnapshots({ ...w, scope: scopeOf(caller), sourceSandboxId: q.sandboxID, name: q.name }),
      (t) => ({ key: t.createdAt, id: t.id }),
    );
    return { ...page, items: page.items.map((t) => ({ snapshotID: t.id, names: t.names })) };
  }
}

export const BUILDS_NOT_IMPLEMENTED =
  'building templates from a Dockerfile through this route is not supported; build with the v2 build API (Template.build in the SDKs: POST /v3/templates, then POST /v2/templates/{templateID}/builds/{buildID})';
