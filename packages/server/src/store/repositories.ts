// What the server keeps, behind interfaces that a store on another database
// (PostgreSQL, for several server processes) can implement as well as the
// embedded SQLite one (./sqlite.ts). Every method is async. A change of a
// sandbox's state is an operation of its repository, which checks the state
// it finds and refuses a change the state does not allow, atomically: two
// processes on one database cannot both pause, resume or kill one sandbox.
import type { SandboxStats } from '@paddock/runtime';
import { randomBytes } from 'node:crypto';

// ---------------------------------------------------------------- refusals

/**
 * A repository operation refused: the record does not exist (`not_found`), or
 * its present state does not allow the change (`conflict`). The message
 * names the record and what it is now.
 */
export class StoreError extends Error {
  constructor(
    readonly kind: 'not_found' | 'conflict',
    message: string,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

// ---------------------------------------------------------------- teams

/**
 * Whose records an operation sees: one team's, or every team's (the admin
 * credential, and the server's own work: expiry, the proxy's routing).
 */
export type TeamScope = { teamId: string } | 'all';

/** Whether a record of team `teamId` is in `scope`. */
export const inScope = (scope: TeamScope, teamId: string | null) => scope === 'all' || scope.teamId === teamId;

/** What a team's running sandboxes may add up to; null: no limit. */
export interface TeamLimits {
  maxSandboxes: number | null;
  maxMemoryMB: number | null;
  maxDiskMB: number | null;
}

export interface TeamRecord {
  id: string;
  name: string;
  createdAt: number;
  limits: TeamLimits;
}

/** What a team's running sandboxes hold now. */
export interface TeamUsage {
  sandboxes: number;
  memoryMB: number;
  diskMB: number;
}

/** The name of the team that what a store held before teams went to, and that the first key joins. */
export const DEFAULT_TEAM_NAME = 'default';

export interface TeamRepository {
  /** Refused (`conflict`) when the name is taken. */
  create(name: string, limits?: Partial<TeamLimits>): Promise<TeamRecord>;
  get(id: string): Promise<TeamRecord | undefined>;
  byName(name: string): Promise<TeamRecord | undefined>;
  /** Oldest first. */
  list(): Promise<TeamRecord[]>;
  /** Sets the limits given (null lifts one); refused (`not_found`) for an unknown id. */
  setLimits(id: string, limits: Partial<TeamLimits>): Promise<TeamRecord>;
  /**
   * Deletes the team and its API keys, in one step. Refused: `not_found` for
   * an unknown id; `conflict` while it has live sandboxes or templates.
   */
  remove(id: string): Promise<void>;
}

// ---------------------------------------------------------------- sandboxes

export type SandboxRecordState = 'running' | 'paused' | 'killed';

/** A change of state that takes time (the runtime pauses or resumes the sandbox) and is claimed first. */
export type SandboxChange = 'pausing' | 'resuming';

export interface NetworkRules {
  allowOut?: string[];
  denyOut?: string[];
  allowPublicTraffic?: boolean;
  maskRequestHost?: string;
}

export interface SandboxRecord {
  id: string;
  templateId: string;
  alias: string | null;
  state: SandboxRecordState;
  /** The change under way, claimed by some server process; null when none. */
  pendingChange: SandboxChange | null;
  pausedWithMemory: boolean;
  startedAt: number;
  endAt: number;
  endedAt: number | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  envdAccessToken: string | null;
  trafficAccessToken: string | null;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  allowInternetAccess: boolean | null;
  network: NetworkRules;
  /** The build of its template it was made from (its start and ready commands); null for records older than builds. */
  buildId: string | null;
  /** The id of the API key that made it; null for records older than per-key limits. */
  apiKeyId: string | null;
  /** The team it belongs to: its key's (a fork's: its source's). */
  teamId: string;
}

/** A new sandbox: running, with no change under way. */
export type NewSandboxRecord = Omit<SandboxRecord, 'state' | 'pendingChange' | 'pausedWithMemory' | 'endedAt' | 'buildId' | 'apiKeyId'> & {
  buildId?: string | null;
  apiKeyId?: string | null;
};

/** The part of a sandbox's record that routes requests to it. */
export type SandboxRoute = Pick<SandboxRecord, 'id' | 'state' | 'autoResume' | 'trafficAccessToken' | 'teamId'> & {
  /** The Host that requests to its ports carry inside (`${PORT}` is the port); unset: the client's. */
  maskRequestHost?: string;
};

/** The fields of a live sandbox that may change without a change of state. */
export type SandboxUpdate = Partial<Pick<SandboxRecord, 'endAt' | 'network' | 'allowInternetAccess'>>;

/** Where a page of a list starts: after the item with this sort key (a time, ms) and id. */
export interface PagePosition {
  key: number;
  id: string;
}

/** One window of an ordered list: up to `limit` items after `after`. */
export interface ListWindow {
  limit: number;
  after?: PagePosition;
}

export interface SandboxListFilter extends ListWindow {
  scope: TeamScope;
  states: Array<'running' | 'paused'>;
  metadata?: Record<string, string>;
  startedAfter?: number;
  templateIds?: string[];
  /** By start time, then id. */
  order: 'asc' | 'desc';
}

export interface TransitionOptions {
  /** Only a sandbox whose expiry is at or before this time (ms) may change: expiry uses it. */
  expiredBy?: number;
  /** Moving to paused: whether its memory was kept. */
  pausedWithMemory?: boolean;
  /** Moving to running: the expiry becomes at least this (ms). */
  extendTo?: number;
}

/**
 * A claimed change of one sandbox, made while the runtime does the work.
 * While it is held, every other claim, and a kill, of the sandbox is refused.
 */
export interface SandboxClaim {
  /** The sandbox as it was when claimed. */
  readonly record: SandboxRecord;
  /** The work is done: the sandbox takes its new state, and the claim ends. */
  complete(options?: Omit<TransitionOptions, 'expiredBy'>): Promise<SandboxRecord>;
  /** The work failed: the claim ends and the state stays what it was. */
  abandon(): Promise<void>;
}

/** What the runtime reports of a sandbox on the host. */
export type HostSandboxStatus = 'running' | 'paused' | 'stopped';

/** What a reconcile found and recorded; the runtime work it calls for is the caller's. */
export interface ReconcileOutcome {
  /** Live records the host agrees with. */
  adopted: string[];
  /** Live records with nothing on the host: now killed. */
  lost: string[];
  /** Recorded running, found paused or stopped: now paused. */
  markedPaused: Array<{ id: string; found: HostSandboxStatus }>;
  /** Recorded paused, found running: the runtime should pause them again. */
  toFreeze: string[];
  /** On the host with no live record: the runtime should remove them. */
  strays: string[];
}

export interface SandboxRepository {
  /** Records a new sandbox, running. */
  insert(record: NewSandboxRecord): Promise<SandboxRecord>;
  /** A sandbox in any state, killed ones included (their logs and metrics stay readable). */
  get(id: string): Promise<SandboxRecord | undefined>;
  /** A sandbox that exists for clients: not killed. */
  live(id: string): Promise<SandboxRecord | undefined>;
  /** What the proxy needs of a live sandbox to route a request to it. */
  route(id: string): Promise<SandboxRoute | undefined>;
  /** Running and paused sandboxes. */
  allLive(): Promise<SandboxRecord[]>;
  running(): Promise<SandboxRecord[]>;
  countRunning(scope: TeamScope): Promise<number>;
  /** Running sandboxes made with this API key. */
  countRunningByKey(apiKeyId: string): Promise<number>;
  /** What the team's running sandboxes hold. */
  usage(teamId: string): Promise<TeamUsage>;
  /** Sandboxes that are not killed, counted by state and template (its first name, else its id). */
  countByState(): Promise<Array<{ state: string; template: string; count: number }>>;
  /** One window of sandboxes, ordered by start time then id. */
  list(filter: SandboxListFilter): Promise<SandboxRecord[]>;
  /** The earliest expiry of a running sandbox. */
  nextExpiry(): Promise<number | undefined>;
  /** Running sandboxes whose expiry is at or before `now`. */
  expired(now: number): Promise<SandboxRecord[]>;

  /**
   * Changes fields of a live sandbox from what they are now, in one step:
   * `change` is given the current record and returns the fields to set.
   * Refused (`not_found`) for a sandbox that is killed or unknown.
   */
  update(id: string, change: (current: SandboxRecord) => SandboxUpdate): Promise<SandboxRecord>;
  /**
   * Moves a sandbox to `to` at once (running ⇄ paused, either to killed),
   * checking the state it is in. Refused (`conflict`) when the state does not
   * allow it, the sandbox is not expired by `expiredBy`, or a change is
   * claimed; `not_found` when it is killed or unknown.
   */
  transition(id: string, to: SandboxRecordState, options?: TransitionOptions): Promise<SandboxRecord>;
  /**
   * Claims the move to `to` for work that takes time: checked as
   * `transition` is, then held until completed or abandoned.
   */
  claim(id: string, to: 'running' | 'paused', options?: Pick<TransitionOptions, 'expiredBy'>): Promise<SandboxClaim>;
  /**
   * Makes the records agree with what the host has, in one step, when a
   * server starts: claims left by a process that died are dropped, and see
   * `ReconcileOutcome` for the rest.
   */
  reconcile(onHost: ReadonlyMap<string, HostSandboxStatus>): Promise<ReconcileOutcome>;
  /** Forgets killed sandboxes that ended before `before`; how many. */
  purgeKilled(before: number): Promise<number>;
}

// ---------------------------------------------------------------- templates

export type BuildStatus = 'building' | 'waiting' | 'ready' | 'error';

/** Why a build failed: a message, and the step (its index from 1, as the SDKs count) that failed. */
export interface BuildFailure {
  message: string;
  step?: string;
  /** The entries of the log that show what went wrong (a failed command's last lines). */
  logEntries?: BuildLogEntry[];
}

export interface BuildRecord {
  id: string;
  templateId: string;
  status: BuildStatus;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  /**
   * The runtime's template that sandboxes of this build start from; null for
   * a template the runtime knows by the template's own id (base, snapshots).
   */
  runtimeTemplateId: string | null;
  /** Run in the background at each start of a sandbox of this build. */
  startCmd: string | null;
  /** Must succeed before a sandbox of this build is handed out. */
  readyCmd: string | null;
  reason: BuildFailure | null;
  /** Tags the build gets once it is ready. */
  tags: string[];
}

export interface BuildLogEntry {
  ts: number;
  level: LogLevel;
  message: string;
  step?: string;
}

/** A new build: of a new template named `names`, or another build of the template that has the name. */
export interface NewBuild {
  /** The team whose template (named `name` in that team) it is. */
  teamId: string;
  /** The template's id if it is new. */
  templateId: string;
  buildId: string;
  name: string;
  tags: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
}

/** How a build ended. */
export type BuildOutcome =
  | { status: 'ready'; runtimeTemplateId: string; startCmd: string | null; readyCmd: string | null }
  | { status: 'error'; reason: BuildFailure };

export type TemplateKind = 'base' | 'snapshot' | 'build';

export interface TemplateRecord {
  id: string;
  /** The team it belongs to; a public template is used (not changed) by every team. */
  teamId: string;
  kind: TemplateKind;
  public: boolean;
  createdAt: number;
  updatedAt: number;
  lastSpawnedAt: number | null;
  spawnCount: number;
  sourceSandboxId: string | null;
  names: string[];
  /** Newest first. */
  builds: BuildRecord[];
}

export interface NewTemplate {
  id: string;
  teamId: string;
  kind: 'base' | 'snapshot';
  public: boolean;
  names: string[];
  sourceSandboxId?: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
}

export interface TemplateTagRecord {
  tag: string;
  buildId: string;
  createdAt: number;
}

export interface SnapshotFilter extends ListWindow {
  scope: TeamScope;
  sourceSandboxId?: string;
  name?: string;
}

/**
 * Whose templates a lookup finds: those of `scope`, and public ones of other
 * teams too when `publicToo` (to start sandboxes from, or read). A name is
 * looked for in the scope's team first, then among public templates.
 */
export interface TemplateViewer {
  scope: TeamScope;
  publicToo: boolean;
}

/**
 * Template records: the built-in base template and snapshots, their names
 * (aliases), builds and tags. (The runtime's template store holds their
 * files; this holds what the control API says of them.) Names are unique
 * within a team.
 */
export interface TemplateRepository {
  /** By id, whoever it belongs to: for the server's own work, after a lookup that checked who asks. */
  get(id: string): Promise<TemplateRecord | undefined>;
  byName(name: string, viewer: TemplateViewer): Promise<TemplateRecord | undefined>;
  /** By id, by name, or `name:tag` (the tag must exist on the template), among what `viewer` sees. */
  resolve(ref: string, viewer: TemplateViewer): Promise<TemplateRecord | undefined>;
  /** What `viewer` sees, oldest first. */
  list(viewer: TemplateViewer): Promise<TemplateRecord[]>;
  /** One window of snapshots, oldest first. */
  listSnapshots(filter: SnapshotFilter): Promise<TemplateRecord[]>;
  /** Whether the team has a template of this name. */
  nameTaken(teamId: string, name: string): Promise<boolean>;
  /** Templates of the team (any kind). */
  countOfTeam(teamId: string): Promise<number>;
  /** Records a template with one ready build; refused (`conflict`) when a name is taken. */
  insert(template: NewTemplate): Promise<TemplateRecord>;
  remove(id: string): Promise<void>;
  setPublic(id: string, isPublic: boolean): Promise<void>;
  /** Counts a sandbox started from the template. */
  recordSpawn(id: string): Promise<void>;
  tag(templateId: string, tag: string): Promise<TemplateTagRecord | undefined>;
  tags(templateId: string): Promise<TemplateTagRecord[]>;
  /** Points each tag at the build, moving those that pointed elsewhere. */
  assignTags(templateId: string, buildId: string, tags: string[]): Promise<void>;
  /** Deletes the tags, all or none: the ones missing are returned, and then nothing is deleted. */
  deleteTags(templateId: string, tags: string[]): Promise<{ missing: string[] }>;

  /**
   * Records a build, waiting for its steps: of the template named
   * `name` when there is one (refused, `conflict`, when it is not a built
   * template or a build of it is under way), else of a new template.
   */
  newBuild(build: NewBuild): Promise<{ template: TemplateRecord; build: BuildRecord }>;
  /** Records a build, waiting, of an existing template of any kind (the base template made again). */
  addBuild(templateId: string, build: Omit<NewBuild, 'templateId' | 'name' | 'teamId'>): Promise<BuildRecord>;
  /** Moves a waiting build to building; refused (`conflict`) in any other state. */
  startBuild(buildId: string): Promise<BuildRecord>;
  /** Ends a build: ready (its tags then point at it) or error. */
  finishBuild(buildId: string, outcome: BuildOutcome): Promise<BuildRecord>;
  /** Builds left building by a server that stopped: they end in error with `reason`; their ids. */
  failUnfinishedBuilds(reason: BuildFailure): Promise<string[]>;
  addBuildLogs(buildId: string, entries: BuildLogEntry[]): Promise<void>;
  /** Log entries of a build in order, from the `offset`-th, up to `limit`, of the levels given (all when none). */
  buildLogs(buildId: string, query: { offset: number; limit: number; levels?: LogLevel[] }): Promise<BuildLogEntry[]>;
}

// ---------------------------------------------------------------- API keys

/** `e2b_` + 40 hex characters: the form every version of the official SDK accepts. */
export const API_KEY_PREFIX = 'e2b_';
export function newApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(20).toString('hex')}`;
}

export interface ApiKeyRecord {
  id: string;
  name: string;
  teamId: string;
  /** The key with its middle hidden, `e2b_1234…abcd`. */
  mask: string;
  /** The parts of the mask: the key's prefix, the length of the rest, and what shows of the rest's start and end. */
  maskParts: { prefix: string; valueLength: number; maskedValuePrefix: string; maskedValueSuffix: string };
  createdAt: number;
  lastUsedAt: number | null;
}

/**
 * API keys, kept as hashes: a key is in clear only in what `create` returns.
 * Each belongs to a team. Operations given a `scope` see that team's keys
 * only: another team's key is `not_found`, as one that does not exist.
 */
export interface ApiKeyRepository {
  count(): Promise<number>;
  /** Stores a new key (`key`, or a new random one) of the team; refused (`not_found`) for an unknown team. */
  create(teamId: string, name: string, key?: string): Promise<{ record: ApiKeyRecord; key: string }>;
  /** Stores the first key, in the default team, only when there is no key, in one step; undefined when there was one. */
  createFirst(name: string, key?: string): Promise<{ record: ApiKeyRecord; key: string } | undefined>;
  /** The key's id and team, or undefined. */
  verify(key: string | undefined): Promise<{ id: string; teamId: string } | undefined>;
  /** Notes that the key was used (not more often than once a minute). */
  touch(id: string): Promise<void>;
  list(scope: TeamScope): Promise<ApiKeyRecord[]>;
  /** Refused (`not_found`) for an unknown id. */
  rename(scope: TeamScope, id: string, name: string): Promise<ApiKeyRecord>;
  /**
   * Refused: `not_found` for an unknown id; `conflict` for the last key of
   * the server, which would leave it with no way in but the admin credential.
   */
  remove(scope: TeamScope, id: string): Promise<void>;
}

/** `paddock_admin_` + 40 hex characters: told apart from API keys at a glance. */
export const ADMIN_KEY_PREFIX = 'paddock_admin_';
export function newAdminKey(): string {
  return `${ADMIN_KEY_PREFIX}${randomBytes(20).toString('hex')}`;
}

/** The admin credential, kept as a hash: in clear only in what `createFirst` returns. */
export interface AdminKeyRepository {
  /** Stores the admin credential only when there is none, in one step; undefined when there was one. */
  createFirst(key?: string): Promise<{ id: string; key: string } | undefined>;
  /** The credential's id, or undefined. */
  verify(key: string | undefined): Promise<string | undefined>;
}

// ---------------------------------------------------------------- telemetry

/** The runtime's stats of one moment, as stored: its time in milliseconds since the epoch. */
export type MetricSample = Omit<SandboxStats, 'timestamp' | 'oomKills'> & { ts: number };

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface LogEntry {
  id: number;
  ts: number;
  level: LogLevel;
  message: string;
  fields: Record<string, string>;
}

export interface LogQuery {
  fromTs?: number;
  limit: number;
  direction: 'forward' | 'backward';
  levels?: string[];
  search?: string;
}

/** Metric samples and lifecycle logs of sandboxes. */
export interface TelemetryRepository {
  addSample(sandboxId: string, sample: MetricSample): Promise<void>;
  /** Samples with `from <= ts <= to` (ms), oldest first. */
  samples(sandboxId: string, from: number, to: number): Promise<MetricSample[]>;
  latest(sandboxId: string): Promise<MetricSample | undefined>;
  log(sandboxId: string, level: LogLevel, message: string, fields?: Record<string, string>): Promise<void>;
  logs(sandboxId: string, query: LogQuery): Promise<LogEntry[]>;
  /** Drops samples and logs older than `before`. */
  purge(before: number): Promise<void>;
  /** Bytes in use inside the disks of running sandboxes, by each one's latest sample. */
  latestDiskUsed(): Promise<number>;
}

// ---------------------------------------------------------------- all of them

export interface Repositories {
  sandboxes: SandboxRepository;
  templates: TemplateRepository;
  apiKeys: ApiKeyRepository;
  adminKeys: AdminKeyRepository;
  teams: TeamRepository;
  telemetry: TelemetryRepository;
  /** Throws unless the store can be written now (within `timeoutMs`); nothing is changed. */
  probe(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}
