// Templates as the control API presents them: the base template and the
// snapshots taken from sandboxes, with their names, builds and tags.
import { BASE_TEMPLATE_ID, envdVersion, type Runtime } from '@paddock/runtime';
import { badRequest, conflict, notFound, toApiError } from './errors.js';
import type { BuildRecord, TemplateRecord, TemplateStore } from './store/templates.js';

const iso = (ms: number) => new Date(ms).toISOString();
// Paddock has no teams; every template is created by the one local owner.
const OWNER = { id: '00000000-0000-4000-8000-000000000000', email: null };
const TAG = /^[a-z0-9][a-z0-9._-]{0,127}$/i;

function page<T>(items: T[], limit: number, token: string | undefined): { items: T[]; nextToken?: string } {
  const start = token === undefined || token === '' ? 0 : Number(Buffer.from(token, 'base64url').toString('utf8'));
  if (!Number.isInteger(start) || start < 0) throw badRequest(`nextToken '${token}' is not a cursor this server issued`);
  const slice = items.slice(start, start + limit);
  const next = start + limit < items.length ? Buffer.from(String(start + limit)).toString('base64url') : undefined;
  return { items: slice, ...(next ? { nextToken: next } : {}) };
}

export class Templates {
  constructor(
    private readonly store: TemplateStore,
    private readonly runtime: Runtime,
  ) {}

  /** Creates the record of the base template on first start. */
  async ensureBase(): Promise<void> {
    if (this.store.get(BASE_TEMPLATE_ID)) return;
    const t = await this.runtime.getTemplate(BASE_TEMPLATE_ID);
    if (!t) throw new Error('the runtime has no base template; prepare() it first');
    this.store.insert({
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

  private require(ref: string): TemplateRecord {
    const t = this.store.resolve(ref);
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

  list() {
    return this.store.list().map((t) => this.summary(t));
  }

  withBuilds(ref: string, limit = 100, nextToken?: string) {
    const t = this.require(ref);
    const builds = page(t.builds, limit, nextToken);
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
    const t = this.require(ref);
    if (t.kind === 'base') throw conflict(`template '${t.id}' is built in and cannot be deleted`);
    await this.runtime.deleteTemplate(t.id).catch((err: unknown) => {
      throw toApiError(err);
    });
    this.store.remove(t.id);
  }

  setPublic(ref: string, isPublic: boolean | undefined) {
    const t = this.require(ref);
    if (isPublic !== undefined) this.store.setPublic(t.id, isPublic);
    return { names: t.names };
  }

  byAlias(alias: string) {
    const t = this.store.byName(alias);
    if (!t) throw notFound(`no template is named '${alias}'`);
    return { templateID: t.id, public: t.public };
  }

  tags(ref: string) {
    const t = this.require(ref);
    return this.store.tags(t.id).map((x) => ({ tag: x.tag, buildID: x.buildId, createdAt: iso(x.createdAt) }));
  }

  /** Tags the build that `target` (`name` or `name:tag`) points at. */
  assignTags(target: string, tags: string[]) {
    if (tags.length === 0) throw badRequest('tags must name at least one tag');
    for (const tag of tags) if (!TAG.test(tag)) throw badRequest(`tag '${tag}' may use letters, digits, '.', '_' and '-', up to 128 characters`);
    const colon = target.lastIndexOf(':');
    const name = colon > 0 ? target.slice(0, colon) : target;
    const t = this.require(name);
    const fromTag = colon > 0 ? this.store.tag(t.id, target.slice(colon + 1)) : undefined;
    if (colon > 0 && !fromTag) throw notFound(`template '${name}' has no tag '${target.slice(colon + 1)}'`);
    const buildId = fromTag?.buildId ?? t.builds[0]!.id;
    this.store.assignTags(t.id, buildId, tags);
    return { tags, buildID: buildId };
  }

  deleteTags(name: string, tags: string[]) {
    const t = this.require(name);
    const missing = tags.filter((tag) => !this.store.tag(t.id, tag));
    if (missing.length) throw notFound(`template '${name}' has no tag ${missing.map((m) => `'${m}'`).join(', ')}`);
    this.store.deleteTags(t.id, tags);
  }

  buildStatus(ref: string, buildId: string) {
    const t = this.require(ref);
    const b = t.builds.find((x) => x.id === buildId);
    if (!b) throw notFound(`template '${t.id}' has no build '${buildId}'`);
    return { logs: [], logEntries: [], templateID: t.id, buildID: b.id, status: b.status };
  }

  buildLogs(ref: string, buildId: string) {
    this.buildStatus(ref, buildId);
    return { logs: [] };
  }

  snapshots(q: { sandboxID?: string; name?: string; limit?: number; nextToken?: string }) {
    const all = this.store
      .list('snapshot')
      .filter((t) => (q.sandboxID === undefined || t.sourceSandboxId === q.sandboxID) && (q.name === undefined || t.names.includes(q.name)))
      .map((t) => ({ snapshotID: t.id, names: t.names }));
    return page(all, q.limit ?? 100, q.nextToken);
  }
}

export const BUILDS_NOT_IMPLEMENTED =
  'building templates from a Dockerfile or build steps is not implemented in Paddock yet; make templates from sandboxes with POST /sandboxes/{sandboxID}/snapshots';
