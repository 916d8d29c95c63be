// Which templates the runtime keeps warm sandboxes of, and how each is made
// ready before it waits in the pool: a template with a start command (the
// code interpreter's Jupyter server, say) has it running, and its ready
// command succeeded, so that a create from the pool answers at once with
// the template as ready as a cold create would have made it.
import type { PooledTemplate, Runtime, WarmPool } from '@paddock/runtime';
import type { Logger } from './log.js';
import type { TemplateRepository } from './store/repositories.js';
import { SandboxShell, startAndWaitReady } from './builds/sandbox-commands.js';
import { readyBuild } from './templates.js';

export interface WarmPoolPlanOptions {
  runtime: Runtime & WarmPool;
  templates: Pick<TemplateRepository, 'list'>;
  /** The operator's list: template names or ids (`warmPoolTemplates`). */
  names: string[];
  /** How long a template's ready command may take to succeed in a pooled sandbox, ms. */
  readyTimeoutMs: number;
  log: Logger;
}

export class WarmPoolPlan {
  /** Runtime template → the store template it serves, for the log. */
  private current = new Map<string, string>();
  private refreshing: Promise<void> = Promise.resolve();

  constructor(private readonly opts: WarmPoolPlanOptions) {}

  /**
   * Reads the store again and tells the runtime what to pool: for each
   * name, the ready build of every template of that name (in any team;
   * the server admits a create before the runtime hands out a sandbox).
   * Called at start and whenever a build finishes or tags move. Calls
   * run one after another, so the last one's view wins.
   */
  refresh(): Promise<void> {
    this.refreshing = this.refreshing.then(() => this.apply()).catch((err: unknown) => this.opts.log.error({ err }, 'the warm pool could not be updated'));
    return this.refreshing;
  }

  private async apply(): Promise<void> {
    const wanted = new Set(this.opts.names);
    const all = await this.opts.templates.list({ scope: 'all', publicToo: true });
    const pooled: PooledTemplate[] = [];
    const next = new Map<string, string>();
    for (const t of all) {
      if (t.kind === 'snapshot' || !(wanted.has(t.id) || t.names.some((n) => wanted.has(n)))) continue;
      const build = readyBuild(t);
      if (!build || build.status !== 'ready') continue;
      const templateId = build.runtimeTemplateId ?? t.id;
      if (next.has(templateId)) continue;
      next.set(templateId, t.names[0] ?? t.id);
      const cmds = { startCmd: build.startCmd, readyCmd: build.readyCmd };
      pooled.push(cmds.startCmd || cmds.readyCmd ? { templateId, prepare: (id) => this.prepare(id, cmds) } : { templateId });
    }
    await this.opts.runtime.setPooledTemplates(pooled);
    const names = [...next.values()].sort().join(', ');
    if (names !== [...this.current.values()].sort().join(', ')) this.opts.log.info({ templates: [...next.values()] }, `warm pool: ${names || 'none'}`);
    this.current = next;
  }

  /** The template's start command in a sandbox just booted for the pool, until its ready command succeeds. */
  private async prepare(sandboxId: string, cmds: { startCmd: string | null; readyCmd: string | null }): Promise<void> {
    // No access token yet: envd takes one when the sandbox is claimed, and
    // until then only the host reaches it, through its socket.
    const shell = new SandboxShell(this.opts.runtime.envdEndpoint(sandboxId));
    try {
      await startAndWaitReady(shell, cmds, { timeoutMs: this.opts.readyTimeoutMs });
    } finally {
      await shell.close().catch(() => undefined);
    }
  }
}
