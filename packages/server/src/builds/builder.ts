// Runs builds: each step in a build container (a sandbox of the runtime,
// made like any other), whose files become the step's layer, a template of
// the runtime named by the step's cache key. An unchanged step of a later
// build finds its template and runs nothing.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { envdToolCommand } from '@paddock/envd';
import { withUser } from '@paddock/envd-client';
import { KeyedMutex, RuntimeError, type Limits, type NetworkRules, type Runtime, type TemplateConfig } from '@paddock/runtime';
import type { BuildFailure, BuildLogEntry, LogLevel, TemplateRepository } from '../store/repositories.js';
import { logOf, type Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { BuildFiles } from './build-files.js';
import { LineSplitter, SandboxShell, startAndWaitReady } from './sandbox-commands.js';
import { cacheTemplateId, stepKey, type BuildPlan, type Step } from './steps.js';
import { Timeline } from './timeline.js';

export interface BuildJob {
  buildId: string;
  /** The logger of the request that asked for the build: its lines carry that request's id. */
  log?: Logger;
  /** The template's id in the store. */
  templateId: string;
  /** Its team: a build starts from that team's templates, or public ones. */
  teamId: string;
  plan: BuildPlan;
  limits: Limits;
}

export interface BuilderOptions {
  runtime: Runtime;
  records: TemplateRepository;
  files: BuildFiles;
  /** The runtime template of a ready build of a template that team `teamId` may use, by its id, name or `name:tag`; throws a 4xx when there is none. */
  runtimeTemplateOf(ref: string, teamId: string): Promise<string>;
  /** Builds run at once; the others wait. */
  concurrency: number;
  /** A build still running after this long fails, ms. */
  timeoutMs: number;
  /** How long a template's ready command may take to succeed, ms. */
  readyTimeoutMs: number;
  /** What build containers may reach (the operator's; default: the internet). The ready check's sandbox is a user's and gets the defaults. */
  network?: NetworkRules;
  log: Logger;
  metrics: Metrics;
  /** Called after a build finished ready. */
  onReady?: () => void;
}

/** The most log entries one build keeps; a runaway command does not fill the store. */
const MAX_LOG_ENTRIES = 20_000;
/** How often a build's new log entries are written, ms. */
const LOG_FLUSH_MS = 200;

/**
 * The environment of envd's own tools: what an image sets that would act on
 * their node (its preloads, its node options) is cleared.
 */
const TOOL_ENV = { NODE_OPTIONS: '', LD_PRELOAD: '', LD_AUDIT: '' };

/** A step that failed: its message is the build's reason. */
class StepFailed extends Error {
  constructor(
    message: string,
    readonly step: string,
    readonly output: BuildLogEntry[] = [],
  ) {
    super(message);
  }
}

/** A build's log, written to the store in batches; `written` is told after each batch a timer wrote. */
class BuildLog {
  private pending: BuildLogEntry[] = [];
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly records: TemplateRepository,
    private readonly buildId: string,
    private readonly written: () => void = () => undefined,
  ) {}

  add(level: LogLevel, message: string, step?: string): BuildLogEntry {
    const entry: BuildLogEntry = { ts: Date.now(), level, message, ...(step ? { step } : {}) };
    if (++this.count === MAX_LOG_ENTRIES) this.pending.push({ ...entry, level: 'warn', message: `the log is cut here: a build keeps at most ${MAX_LOG_ENTRIES} entries` });
    if (this.count < MAX_LOG_ENTRIES) this.pending.push(entry);
    this.timer ??= setTimeout(() => void this.flush().then(this.written), LOG_FLUSH_MS);
    return entry;
  }

  /**
   * Writes what is pending. The build's own last writes, before its end is
   * stored, tell no one: a status read between them would answer the last
   * entries with the build still running (and an SDK would sleep through
   * its end), where the end's own wake answers both.
   */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    this.writing = this.writing.then(() => this.records.addBuildLogs(this.buildId, batch)).catch(() => undefined);
    return this.writing;
  }
}

/** What a build has made so far: the template its next step stands on, and how processes run. */
interface Progress {
  current: string;
  key: string;
  config: TemplateConfig;
  forced: boolean;
  /**
   * The network slot the build's step containers join (runtime.holdStepNetwork),
   * taken by its first step that runs a command and released at its end.
   */
  network?: Promise<string>;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** `KEY=value` entries as a map, the later of one name winning. */
const envMap = (env: string[]) => Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

export class Builder {
  private readonly queue: BuildJob[] = [];
  private running = 0;
  private readonly layerLocks = new KeyedMutex();
  private readonly aborts = new Map<string, AbortController>();
  /** Who waits for news of a build (a held status request): its end or new log entries, by build id. */
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Build containers being removed after their step. */
  private readonly removals = new Set<Promise<unknown>>();
  private closed = false;

  constructor(private readonly opts: BuilderOptions) {}

  /** Builds a server that stopped left under way end in error. */
  async recover(): Promise<string[]> {
    return this.opts.records.failUnfinishedBuilds({ message: 'the server stopped while the build ran; start the build again' });
  }

  /**
   * Resolves when build `buildId` has ended (its status stored), when new
   * entries of its log have been written, or after `ms`; at once when this
   * builder is not running it or queueing it, with false.
   */
  untilNews(buildId: string, ms: number): Promise<boolean> {
    if (!this.aborts.has(buildId) && !this.queue.some((j) => j.buildId === buildId)) return Promise.resolve(false);
    return new Promise((resolve) => {
      let waiters = this.waiters.get(buildId);
      if (!waiters) this.waiters.set(buildId, (waiters = new Set()));
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.waiters.get(buildId) === waiters) this.waiters.delete(buildId);
        resolve(true);
      };
      const timer = setTimeout(wake, ms);
      waiters.add(wake);
    });
  }

  /** Wakes who waits for news of build `buildId`: its end, or new log entries. */
  private ended(buildId: string): void {
    for (const wake of [...(this.waiters.get(buildId) ?? [])]) wake();
  }

  enqueue(job: BuildJob): void {
    if (this.closed) throw new RuntimeError('unavailable', 'the server is shutting down');
    const log = (job.log ?? logOf(this.opts.log)).child({ buildID: job.buildId, templateID: job.templateId });
    log.info({ queued: this.queue.length }, 'build queued');
    this.queue.push({ ...job, log });
    this.opts.metrics.buildsQueued.set(this.queue.length);
    this.next();
  }

  /** Stops taking builds and ends the running ones (in error). */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      await this.opts.records.finishBuild(job.buildId, { status: 'error', reason: { message: 'the server stopped before the build ran' } }).catch(() => undefined);
      this.ended(job.buildId);
    }
    for (const abort of this.aborts.values()) abort.abort(new Error('the server stopped while the build ran'));
    for (let i = 0; i < 600 && this.running > 0; i++) await new Promise((r) => setTimeout(r, 50));
    await Promise.all([...this.removals]);
  }

  private next(): void {
    while (!this.closed && this.running < this.opts.concurrency && this.queue.length > 0) {
      const job = this.queue.shift()!;
      this.running++;
      this.opts.metrics.buildsQueued.set(this.queue.length);
      this.opts.metrics.buildsRunning.set(this.running);
      void this.run(job).finally(() => {
        this.running--;
        this.opts.metrics.buildsRunning.set(this.running);
        this.next();
      });
    }
  }

  private async run(job: BuildJob): Promise<void> {
    const log = new BuildLog(this.opts.records, job.buildId, () => this.ended(job.buildId));
    const abort = new AbortController();
    this.aborts.set(job.buildId, abort);
    const timer = setTimeout(() => abort.abort(new Error(`the build took longer than ${Math.round(this.opts.timeoutMs / 1000)} s`)), this.opts.timeoutMs);
    const started = Date.now();
    const done = (status: 'ready' | 'error') => this.opts.metrics.buildSeconds.observe({ status }, (Date.now() - started) / 1000);
    job.log?.info('build started');
    try {
      const made = job.plan.source.kind === 'base' ? await this.rebuildBase(log) : await this.steps(job, log, abort.signal);
      log.add('info', `Build finished in ${((Date.now() - started) / 1000).toFixed(1)} s`, 'finalize');
      await log.flush();
      await this.opts.records.finishBuild(job.buildId, { status: 'ready', runtimeTemplateId: made, startCmd: job.plan.startCmd, readyCmd: job.plan.readyCmd });
      done('ready');
      job.log?.info({ ms: Date.now() - started }, 'build finished');
      this.opts.onReady?.();
    } catch (err) {
      const reason: BuildFailure =
        err instanceof StepFailed
          ? { message: err.message, step: err.step, logEntries: err.output }
          : { message: abort.signal.aborted ? String((abort.signal.reason as Error).message) : (err as Error).message };
      log.add('error', `Build failed: ${reason.message}`, reason.step);
      await log.flush();
      await this.opts.records.finishBuild(job.buildId, { status: 'error', reason }).catch(() => undefined);
      done('error');
      job.log?.warn({ ms: Date.now() - started, step: reason.step, reason: reason.message }, 'build failed');
    } finally {
      clearTimeout(timer);
      this.aborts.delete(job.buildId);
      this.ended(job.buildId);
    }
  }

  /** The base template's image made again; its progress is the build's log. */
  private async rebuildBase(log: BuildLog): Promise<string> {
    log.add('info', 'Making the base template again', 'base');
    const made = await this.opts.runtime.rebuildBase((m) => void log.add('info', m, 'base'));
    return made.id;
  }

  /** Runs the steps; the runtime template the build made. */
  private async steps(job: BuildJob, log: BuildLog, signal: AbortSignal): Promise<string> {
    const { plan } = job;
    const p = await this.base(job, log, signal);
    try {
      await this.eachStep(job, p, log, signal);
    } finally {
      // Its last step's container is done with it: it goes in the background, as that container does.
      p.network?.then((id) => this.removeInBackground(id, job.log)).catch(() => undefined);
    }
    // The template sandboxes start from: the last layer with the config as
    // the steps left it, and its own id for each start and ready command, so
    // that a runtime template (and the warm pool's sandboxes of it, which run
    // the start command before they are taken) stands for one of each.
    const cmds = plan.startCmd || plan.readyCmd ? [plan.startCmd, plan.readyCmd] : [];
    const finalId = cacheTemplateId(sha256(JSON.stringify([p.key, 'final', p.config, ...cmds])));
    await this.layerLocks.run(finalId, async () => {
      if (!(await this.opts.runtime.getTemplate(finalId))) await this.opts.runtime.deriveTemplate(finalId, p.current, p.config);
    });
    if (plan.startCmd || plan.readyCmd) await this.checkReady(job, finalId, log, signal);
    return finalId;
  }

  /** The steps in order, each from where `p` says the one before left the build. */
  private async eachStep(job: BuildJob, p: Progress, log: BuildLog, signal: AbortSignal): Promise<void> {
    const total = job.plan.steps.length;
    for (const step of job.plan.steps) {
      signal.throwIfAborted();
      const name = String(step.number);
      const label = `[${step.number}/${total}] ${describe(step)}`;
      p.forced ||= step.force;
      switch (step.type) {
        case 'ENV':
          p.config = { ...p.config, env: withVars(p.config.env, step.vars) };
          p.key = stepKey(p.key, step, p.config);
          log.add('info', label, name);
          break;
        default:
          await this.layer(job, p, step, label, name, log, signal);
      }
    }
  }

  /** The template the first step stands on: an image's, pulled or imported, or a template's. */
  private async base(job: BuildJob, log: BuildLog, signal: AbortSignal): Promise<Progress> {
    const { source } = job.plan;
    const { runtime } = this.opts;
    if (source.kind === 'image' || source.kind === 'archive') {
      const what = source.kind === 'image' ? source.reference : `the uploaded image archive ${source.filesHash}`;
      log.add('info', `FROM ${what}`, 'base');
      const onProgress = (m: string) => void log.add('info', m, 'base');
      const rootId = source.kind === 'image' ? `i-${sha256(source.reference).slice(0, 60)}` : `a-${source.filesHash.slice(0, 60)}`;
      let info;
      try {
        info = await this.layerLocks.run(rootId, () =>
          source.kind === 'image'
            ? runtime.templateFromImage(rootId, source.reference, { replace: true, limits: job.limits, onProgress, ...(source.auth ? { auth: source.auth } : {}) })
            : runtime.templateFromArchive(rootId, this.opts.files.path(source.filesHash), { replace: true, limits: job.limits, onProgress }),
        );
      } catch (err) {
        throw new StepFailed(`image '${source.kind === 'image' ? source.reference : source.filesHash}' could not be ${source.kind === 'image' ? 'pulled' : 'imported'}: ${(err as Error).message}`, 'base');
      }
      signal.throwIfAborted();
      return { current: rootId, key: sha256(`image\n${info.imageId}`), config: info.config, forced: job.plan.force };
    }
    if (source.kind === 'base') throw new Error('the base template is made again by rebuildBase, not as a build on a base');
    log.add('info', `FROM template ${source.ref}`, 'base');
    let id: string;
    try {
      id = await this.opts.runtimeTemplateOf(source.ref, job.teamId);
    } catch (err) {
      throw new StepFailed((err as Error).message, 'base');
    }
    const info = await runtime.getTemplate(id);
    if (!info) throw new StepFailed(`template '${source.ref}' has no files on this server`, 'base');
    return { current: id, key: sha256(`template\n${id}\n${info.imageId}`), config: info.config, forced: job.plan.force };
  }

  /**
   * A step that changes files, unless its layer is cached: a COPY placed by
   * the runtime into a new layer directly, any other run in a build container.
   */
  private async layer(job: BuildJob, p: Progress, step: Step, label: string, name: string, log: BuildLog, signal: AbortSignal): Promise<void> {
    const next = nextConfig(step, p.config);
    let key = stepKey(p.key, step, next);
    // A forced step makes a layer of its own, which later builds do not find by its inputs.
    if (p.forced) key = sha256(`${key}\n${job.buildId}`);
    const id = cacheTemplateId(key);
    await this.layerLocks.run(id, async () => {
      if (await this.opts.runtime.getTemplate(id)) {
        log.add('info', `CACHED ${label}`, name);
        return;
      }
      log.add('info', label, name);
      const t = new Timeline();
      if (step.type === 'COPY') await this.copyLayer(job, p, step, id, next, name, log, signal, t);
      else if (step.type === 'WORKDIR') await this.workdirLayer(job, p, step, id, next, name, signal, t);
      else if (step.type !== 'ENV') await this.commandLayer(job, p, step, id, next, name, log, signal, t);
      job.log?.info({ step: name, ...t.ms() }, 'build step timeline');
      log.add('info', `${label}: done in ${t.summary()}`, name);
    });
    p.current = id;
    p.key = key;
    p.config = next;
  }

  /** A COPY's layer: the archive's files placed over the layers so far, as the step says, with no container. */
  private async copyLayer(job: BuildJob, p: Progress, step: Step & { type: 'COPY' }, id: string, next: TemplateConfig, name: string, log: BuildLog, signal: AbortSignal, t: Timeline): Promise<void> {
    const files = {
      archive: this.opts.files.path(step.filesHash),
      unpacked: this.opts.files.unpacked(step.filesHash),
      source: step.source,
      dest: step.dest,
      ...(p.config.workingDir ? { workdir: p.config.workingDir } : {}),
      ...(p.config.user ? { user: p.config.user } : {}),
      ...(step.owner ? { owner: step.owner } : {}),
      ...(step.mode ? { mode: step.mode } : {}),
    };
    try {
      await this.opts.runtime.templateWithFiles(id, p.current, files, { config: next, limits: job.limits, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      const why = (err as Error).message;
      throw new StepFailed(`copying '${step.source}' to '${step.dest}' failed: ${why}`, name, [log.add('error', why, name)]);
    }
    t.mark('copy');
  }

  /**
   * A RUN's or USER's layer: its command is the only process of a build
   * container on the layers so far (made as a sandbox is, without envd; the
   * command runs as envd would run it), and the files it leaves become the
   * layer.
   */
  private async commandLayer(job: BuildJob, p: Progress, step: Step & { type: 'RUN' | 'USER' }, id: string, next: TemplateConfig, name: string, log: BuildLog, signal: AbortSignal, t: Timeline): Promise<void> {
    const output: BuildLogEntry[] = [];
    const onLine = (line: string) => {
      output.push(log.add('info', line, name));
      if (output.length > 40) output.shift();
    };
    const split = { stdout: new LineSplitter(onLine), stderr: new LineSplitter(onLine) };
    const [what, command] =
      step.type === 'RUN'
        ? [`the command '${step.command}'`, { shell: step.command, user: step.user ?? p.config.user, cwd: p.config.workingDir, env: envMap(p.config.env) }]
        : [`making the user '${step.user}'`, { argv: envdToolCommand('user', [step.user]), user: 'root', env: TOOL_ENV }];
    let result;
    try {
      p.network ??= this.opts.runtime.holdStepNetwork(this.opts.network);
      const stepNetwork = await p.network;
      result = await this.opts.runtime.runStep(p.current, id, command, { limits: job.limits, stepNetwork, config: next, signal, onOutput: (stream, bytes) => split[stream].push(bytes) });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new StepFailed(`the build container did not start: ${(err as Error).message}`, name);
    } finally {
      split.stdout.end();
      split.stderr.end();
    }
    // The container is of no more use: the next step need not wait for its removal.
    this.removeInBackground(result.sandboxId, job.log);
    t.add(result.ms);
    if (result.exitCode !== 0) throw new StepFailed(`${what} failed: ${result.status}`, name, output.slice(-20));
  }

  /** A WORKDIR's layer: a build container (a sandbox, with envd) on the layers so far makes the directory, and its files become the layer. */
  private async workdirLayer(job: BuildJob, p: Progress, step: Step & { type: 'WORKDIR' }, id: string, next: TemplateConfig, name: string, signal: AbortSignal, t: Timeline): Promise<void> {
    const { runtime } = this.opts;
    let sandbox;
    try {
      sandbox = await runtime.create({ templateId: p.current, limits: job.limits, cold: true, network: this.opts.network });
    } catch (err) {
      throw new StepFailed(`the build container did not start: ${(err as Error).message}`, name);
    }
    t.mark('container');
    const shell = new SandboxShell(runtime.envdEndpoint(sandbox.id));
    try {
      await this.makeWorkdir(step, p.config, shell, name, signal);
      t.mark('step');
      signal.throwIfAborted();
      await runtime.snapshot(sandbox.id, id, { config: next, end: true });
      t.mark('layer');
    } finally {
      await shell.close().catch(() => undefined);
      // The container is of no more use: the next step need not wait for its removal.
      this.removeInBackground(sandbox.id, job.log);
    }
  }

  /** Destroys a build container without waiting; close() waits for every removal still under way. */
  private removeInBackground(sandboxId: string, log: Logger | undefined): void {
    const removal = this.opts.runtime
      .destroy(sandboxId)
      .catch((err: unknown) => log?.warn({ sandboxID: sandboxId, err }, 'the build container could not be removed'))
      .finally(() => this.removals.delete(removal));
    this.removals.add(removal);
  }

  /** WORKDIR: the directory made (with its parents) as the template's user, through envd, as it makes a directory for a client. */
  private async makeWorkdir(step: Step & { type: 'WORKDIR' }, config: TemplateConfig, shell: SandboxShell, name: string, signal: AbortSignal): Promise<void> {
    const dir = posix.resolve(config.workingDir ?? '/', step.path);
    try {
      await shell.envd.filesystem.makeDir({ path: dir }, { ...(config.user ? withUser(config.user) : {}), signal });
    } catch (err) {
      // Already there is what WORKDIR wants.
      if (!/already exists/i.test((err as Error).message)) throw new StepFailed(`the directory '${dir}' could not be made: ${(err as Error).message}`, name);
    }
  }

  /** Starts a sandbox of the built template as every sandbox of it will start, and waits for it to be ready. */
  private async checkReady(job: BuildJob, templateId: string, log: BuildLog, signal: AbortSignal): Promise<void> {
    const { runtime } = this.opts;
    log.add('info', `Start command: ${job.plan.startCmd ?? '(none)'}; ready command: ${job.plan.readyCmd ?? '(none)'}`, 'finalize');
    const sandbox = await runtime.create({ templateId, limits: job.limits, cold: true });
    const shell = new SandboxShell(runtime.envdEndpoint(sandbox.id));
    const output: BuildLogEntry[] = [];
    try {
      await startAndWaitReady(shell, job.plan, {
        timeoutMs: this.opts.readyTimeoutMs,
        onOutput: (o) => output.push(log.add('info', o.line, 'finalize')),
      });
      signal.throwIfAborted();
    } catch (err) {
      if (signal.aborted) throw err;
      throw new StepFailed((err as Error).message, 'finalize', output.slice(-20));
    } finally {
      await shell.close().catch(() => undefined);
      this.removeInBackground(sandbox.id, job.log);
    }
  }
}

/**
 * The environment with `vars` set, each value's `$NAME` and `${NAME}` taken
 * from the environment as it was before the step (`PATH=/opt/bin:$PATH`);
 * `\$` is a `$` as it is. Nothing else of a shell is done.
 */
export function withVars(env: string[], vars: Array<[string, string]>): string[] {
  const before = envMap(env);
  const expand = (value: string) =>
    value.replace(/\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, braced?: string, bare?: string) => (m === '\\$' ? '$' : (before[braced ?? bare!] ?? '')));
  const set = new Map(vars.map(([k, v]) => [k, expand(v)]));
  return [...env.filter((e) => !set.has(e.slice(0, e.indexOf('=')))), ...[...set].map(([k, v]) => `${k}=${v}`)];
}

/** The config a step leaves behind it. */
function nextConfig(step: Step, config: TemplateConfig): TemplateConfig {
  if (step.type === 'USER') return { ...config, user: step.user };
  if (step.type === 'WORKDIR') return { ...config, workingDir: posix.resolve(config.workingDir ?? '/', step.path) };
  return config;
}

function describe(step: Step): string {
  switch (step.type) {
    case 'RUN':
      return `RUN ${step.command}${step.user ? ` (as ${step.user})` : ''}`;
    case 'COPY':
      return `COPY ${step.source} ${step.dest}`;
    case 'ENV':
      return `ENV ${step.vars.map(([k, v]) => `${k}=${v}`).join(' ')}`;
    case 'WORKDIR':
      return `WORKDIR ${step.path}`;
    case 'USER':
      return `USER ${step.user}`;
  }
}
