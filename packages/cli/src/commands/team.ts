// `paddock team`: the teams of a Paddock server and their limits, through
// the admin routes of its control API, with the admin credential (from any
// machine that has it).
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { Team, TeamLimits } from '@paddock/control-client';
import { adminCommands, findTeam } from '../control.js';
import { printJson, table } from '../output.js';

/** A limit on the command line: a whole number, or `none` to lift it (commander would turn a parsed null into ''). */
type LimitFlag = number | 'none';

interface LimitFlags {
  maxSandboxes?: LimitFlag;
  maxMemoryMb?: LimitFlag;
  maxDiskMb?: LimitFlag;
}

function limit(value: string): LimitFlag {
  if (value === 'none') return value;
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`'${value}' is not a whole number or 'none'`);
  return Number(value);
}

function limitOptions(cmd: Command): Command {
  return cmd
    .option('--max-sandboxes <n>', "sandboxes running at once ('none': no limit)", limit)
    .option('--max-memory-mb <n>', "memory of its running sandboxes together, MiB ('none': no limit)", limit)
    .option('--max-disk-mb <n>', "disk of its running sandboxes together, MiB ('none': no limit)", limit);
}

const value = (f: LimitFlag) => (f === 'none' ? null : f);
const limitsOf = (o: LimitFlags): TeamLimits => ({
  ...(o.maxSandboxes !== undefined ? { maxSandboxes: value(o.maxSandboxes) } : {}),
  ...(o.maxMemoryMb !== undefined ? { maxMemoryMB: value(o.maxMemoryMb) } : {}),
  ...(o.maxDiskMb !== undefined ? { maxDiskMB: value(o.maxDiskMb) } : {}),
});

const shown = (n: number | null | undefined, unit = '') => (n === null || n === undefined ? '-' : `${n}${unit}`);
const used = (t: Team) => `${t.usage.sandboxes}/${shown(t.limits.maxSandboxes)}`;

function describe(t: Team): string {
  return (
    table(
      ['', ''],
      [
        ['id', t.teamID],
        ['name', t.name],
        ['created', t.createdAt],
        ['sandboxes', `${t.usage.sandboxes} running, limit ${shown(t.limits.maxSandboxes)}`],
        ['memory', `${t.usage.memoryMB} MiB, limit ${shown(t.limits.maxMemoryMB, ' MiB')}`],
        ['disk', `${t.usage.diskMB} MiB, limit ${shown(t.limits.maxDiskMB, ' MiB')}`],
      ],
    )
      .split('\n')
      .slice(1)
      .join('\n')
  );
}

export function registerTeamCommands(root: Command, home: () => string): void {
  const team = root.command('team').description('Teams of a Paddock server and their limits (needs the admin credential)');
  const run = adminCommands(team, home);

  limitOptions(team.command('create <name>').description('Create a team (then `paddock keys create --team <name>` gives it a key)'))
    .option('--json', 'print as JSON')
    .action((name: string, o: LimitFlags & { json?: boolean }) =>
      run(async (control) => {
        const made = await control.createTeam({ name, limits: limitsOf(o) });
        if (o.json) return printJson(made);
        process.stdout.write(`${made.teamID}\n`);
        process.stderr.write(`created team '${made.name}'\n`);
      }),
    );

  team
    .command('list')
    .description('List teams, with their running sandboxes and limits')
    .option('--json', 'print as JSON')
    .action((o: { json?: boolean }) =>
      run(async (control) => {
        const teams = await control.listTeams();
        if (o.json) return printJson(teams);
        process.stdout.write(
          table(
            ['id', 'name', 'sandboxes', 'memory MiB', 'disk MiB', 'created'],
            teams.map((t) => [t.teamID, t.name, used(t), `${t.usage.memoryMB}/${shown(t.limits.maxMemoryMB)}`, `${t.usage.diskMB}/${shown(t.limits.maxDiskMB)}`, t.createdAt]),
          ),
        );
      }),
    );

  team
    .command('show <team>')
    .description('Show a team (by id or name): its limits and what its running sandboxes hold')
    .option('--json', 'print as JSON')
    .action((ref: string, o: { json?: boolean }) =>
      run(async (control) => {
        const t = await findTeam(control, ref);
        if (o.json) return printJson(t);
        process.stdout.write(describe(t));
      }),
    );

  team
    .command('delete <team>')
    .description('Delete a team (by id or name) and its keys; refused while it has sandboxes or templates')
    .action((ref: string) =>
      run(async (control) => {
        const t = await findTeam(control, ref);
        await control.deleteTeam(t.teamID);
        process.stderr.write(`deleted team '${t.name}'\n`);
      }),
    );

  limitOptions(team.command('limits <team>').description("Set a team's limits (by id or name); with none given, show them"))
    .option('--json', 'print as JSON')
    .action((ref: string, o: LimitFlags & { json?: boolean }) =>
      run(async (control) => {
        const t = await findTeam(control, ref);
        const limits = limitsOf(o);
        const now = Object.keys(limits).length ? await control.setTeamLimits(t.teamID, limits) : t;
        if (o.json) return printJson(now);
        process.stdout.write(describe(now));
      }),
    );
}
