// Templates as the control API presents them: the base template and the
// snapshots taken from sandboxes, with their names, builds and tags.
import { BASE_TEMPLATE_ID, envdVersion, type Runtime } from '@paddock/runtime';
import { badRequest, conflict, notFound, toApiError } from './errors.js';
import { readPage, windowOf, type Page } from './pagination.js';
import type { BuildRecord, TemplateRecord, TemplateRepository } from './store/repositories.js';

const iso = (ms: number) => new Date(ms).toISOString();
// Paddock has no teams; every template is created by the one local owner.
const OWNER = { id: '00000000-0000-4000-8000-000000000000', email: null };
const TAG = /^[a-z0-9][a-z0-9._-]{0,127}$/i;

export class Templates {
  constructor(
    private readonly records: TemplateRepository,
    private readonly runtime: Runtime,
  ) {}

  /** Creates the record of the base template on first start. */
  async ensureBase(): Promise<void> {
    if (await this.records.get(BASE_TEMPLATE_ID)) return;
    const t = await this.runtime.getTemplate(BASE_TEMPLATE_ID);
    if (!t) throw new Error('the runtime has no base template; prepare() it first');
    await this.records.insert({
      id: BASE_TEMPLATE_ID,
      kind: 'base',
      public: true,
      names: [BASE_TEMPLATE_ID],
      cpuCount: t.limits.cpuCount,
      memoryMB: t.limits.memoryMB,
      diskSizeMB: t.limits.diskSizeMB,
      envdVersion,
    });
  }

  private async require(ref: string): Promise<TemplateRecord> {
    const t = await this.records.resolve(ref);
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

  async list() {
    return (await this.records.list()).map((t) => this.summary(t));
  }

  /** The template and one page of its builds, newest first. */
  async withBuilds(ref: string, q: { limit?: number; nextToken?: string }) {
    const t = await this.require(ref);
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

  async remove(ref: string): Promise<void> {
    const t = await this.require(ref);
    if (t.kind === 'base') throw conflict(`template '${t.id}' is built in and cannot be deleted`);
    await this.runtime.deleteTemplate(t.id).catch((err: unknown) => {
      throw toApiError(err);
    });
    await this.records.remove(t.id);
  }

  async setPublic(ref: string, isPublic: boolean | undefined) {
    const t = await this.require(ref);
    if (isPublic !== undefined) await this.records.setPublic(t.id, isPublic);
    return { names: t.names };
  }

  async byAlias(alias: string) {
    const t = await this.records.byName(alias);
    if (!t) throw notFound(`no template is named '${alias}'`);
    return { templateID: t.id, public: t.public };
  }

  async tags(ref: string) {
    const t = await this.require(ref);
    return (await this.records.tags(t.id)).map((x) => ({ tag: x.tag, buildID: x.buildId, createdAt: iso(x.createdAt) }));
  }

  /** Tags the build that `target` (`name` or `name:tag`) points at. */
  async assignTags(target: string, tags: string[]) {
    if (tags.length === 0) throw badRequest('tags must name at least one tag');
    for (const tag of tags) if (!TAG.test(tag)) throw badRequest(`tag '${tag}' may use letters, digits, '.', '_' and '-', up to 128 characters`);
    const colon = target.lastIndexOf(':');
    const name = colon > 0 ? target.slice(0, colon) : target;
    const t = await this.require(name);
    const fromTag = colon > 0 ? await this.records.tag(t.id, target.slice(colon + 1)) : undefined;
    if (colon > 0 && !fromTag) throw notFound(`template '${name}' has no tag '${target.slice(colon + 1)}'`);
    const buildId = fromTag?.buildId ?? t.builds[0]!.id;
    await this.records.assignTags(t.id, buildId, tags);
    return { tags, buildID: buildId };
  }

  async deleteTags(name: string, tags: string[]) {
    const t = await this.require(name);
    const { missing } = await this.records.deleteTags(t.id, tags);
    if (missing.length) throw notFound(`template '${name}' has no tag ${missing.map((m) => `'${m}'`).join(', ')}`);
  }

  async buildStatus(ref: string, buildId: string) {
    const t = await this.require(ref);
    const b = t.builds.find((x) => x.id === buildId);
    if (!b) throw notFound(`template '${t.id}' has no build '${buildId}'`);
    return { logs: [], logEntries: [], templateID: t.id, buildID: b.id, status: b.status };
  }

  async buildLogs(ref: string, buildId: string) {
    await this.buildStatus(ref, buildId);
    return { logs: [] };
  }

  async snapshots(q: { sandboxID?: string; name?: string; limit?: number; nextToken?: string }): Promise<Page<{ snapshotID: string; names: string[] }>> {
    const page = await readPage(
      q,
      (w) => this.records.listSnapshots({ ...w, sourceSandboxId: q.sandboxID, name: q.name }),
      (t) => ({ key: t.createdAt, id: t.id }),
    );
    return { ...page, items: page.items.map((t) => ({ snapshotID: t.id, names: t.names })) };
  }
}

export const BUILDS_NOT_IMPLEMENTED =
  'building templates from a Dockerfile or build steps is not implemented in Paddock yet; make templates from sandboxes with POST /sandboxes/{sandboxID}/snapshots';
