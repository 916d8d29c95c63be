// Whether a sandbox may start: the limits on what runs at once, checked in
// one place for creates, forks and resumes. A key may have so many running
// sandboxes (PADDOCK_MAX_SANDBOXES_PER_KEY); a team so many, and so much
// memory and disk in them (its limits, set by the admin). Sandboxes being
// made or resumed count from the moment they are admitted: a place is held
// before the store is read, so two requests at once cannot both take the
// last one.
import { ApiError } from './errors.js';
import type { SandboxRepository, TeamLimits, TeamRepository, TeamUsage } from './store/repositories.js';

/** What a sandbox about to start takes. */
export interface Demand {
  teamId: string;
  /** The key making it, held to the per-key limit; none for a resume. */
  keyId?: string;
  memoryMB: number;
  diskMB: number;
}

const LIMITS: Array<{ field: keyof TeamLimits; use: keyof TeamUsage; what: (n: number) => string }> = [
  { field: 'maxSandboxes', use: 'sandboxes', what: (n) => `${n} running sandbox${n === 1 ? '' : 'es'}` },
  { field: 'maxMemoryMB', use: 'memoryMB', what: (n) => `${n} MiB of memory in running sandboxes` },
  { field: 'maxDiskMB', use: 'diskMB', what: (n) => `${n} MiB of disk in running sandboxes` },
];

export class Admission {
  /** Places held per key and per team, by sandboxes being made or resumed. */
  private readonly byKey = new Map<string, number>();
  private readonly byTeam = new Map<string, TeamUsage>();

  constructor(
    private readonly maxSandboxesPerKey: number,
    private readonly sandboxes: Pick<SandboxRepository, 'countRunningByKey' | 'usage'>,
    private readonly teams: Pick<TeamRepository, 'get'>,
  ) {}

  /**
   * Runs `start` if the demand fits the limits, holding its place until
   * `start` ends; else refuses with 429 naming the limit (no Retry-After: a
   * sandbox must end first).
   */
  async admit<T>(demand: Demand, start: () => Promise<T>): Promise<T> {
    const release = this.hold(demand);
    try {
      await this.check(demand);
      return await start();
    } finally {
      release();
    }
  }

  private hold(d: Demand): () => void {
    const team = this.byTeam.get(d.teamId) ?? { sandboxes: 0, memoryMB: 0, diskMB: 0 };
    team.sandboxes += 1;
    team.memoryMB += d.memoryMB;
    team.diskMB += d.diskMB;
    this.byTeam.set(d.teamId, team);
    if (d.keyId !== undefined) this.byKey.set(d.keyId, (this.byKey.get(d.keyId) ?? 0) + 1);
    return () => {
      team.sandboxes -= 1;
      team.memoryMB -= d.memoryMB;
      team.diskMB -= d.diskMB;
      if (team.sandboxes === 0) this.byTeam.delete(d.teamId);
      if (d.keyId !== undefined) {
        const left = (this.byKey.get(d.keyId) ?? 1) - 1;
        if (left > 0) this.byKey.set(d.keyId, left);
        else this.byKey.delete(d.keyId);
      }
    };
  }

  private async check(d: Demand): Promise<void> {
    const max = this.maxSandboxesPerKey;
    if (d.keyId !== undefined && max > 0) {
      // This request's own place is among those held.
      const count = (await this.sandboxes.countRunningByKey(d.keyId)) + (this.byKey.get(d.keyId) ?? 1) - 1;
      if (count >= max) {
        throw new ApiError(429, `API key '${d.keyId}' has ${count} running sandboxes, the most this server allows one key (PADDOCK_MAX_SANDBOXES_PER_KEY); kill or pause one first`);
      }
    }
    const team = await this.teams.get(d.teamId);
    if (!team || LIMITS.every((l) => team.limits[l.field] === null)) return;
    const running = await this.sandboxes.usage(d.teamId);
    const held = this.byTeam.get(d.teamId)!;
    for (const l of LIMITS) {
      const limit = team.limits[l.field];
      if (limit === null) continue;
      // Those running, those being made or resumed, this one included.
      const total = running[l.use] + held[l.use];
      if (total > limit) {
        const now = total - (l.use === 'sandboxes' ? 1 : l.use === 'memoryMB' ? d.memoryMB : d.diskMB);
        throw new ApiError(
          429,
          `team '${team.name}' may have at most ${l.what(limit)} (its ${l.field} limit); it has ${l.what(now)}, and this sandbox would make it ${l.what(total)}; kill or pause one first`,
        );
      }
    }
  }
}
