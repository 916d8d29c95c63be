// `paddock keys`: API keys of a Paddock server, through its control API (the
// server keeps them as hashes; a key's value is shown once, when created).
// Without --team, the keys of the team of the key in use; with it, any
// team's, through the admin routes with the admin credential.
import type { Command } from 'commander';
import { Option } from 'commander';
import type { ControlClient, CreatedTeamAPIKey, TeamAPIKey } from '@paddock/control-client';
import { adminCommands, controlCommands, findTeam } from '../control.js';
import { readCredentials } from '../credentials.js';
import { CliError, EXIT, printJson, table } from '../output.js';

const masked = (k: TeamAPIKey) => `${k.mask.prefix}${k.mask.maskedValuePrefix}…${k.mask.maskedValueSuffix}`;

export function registerKeyCommands(root: Command, home: () => string): void {
  const keys = root.command('keys').description('API keys of a Paddock server (it must be running)');
  const ownTeam = controlCommands(keys, home);
  const asAdmin = adminCommands(keys, home);
  /** With --team, the admin's client and the team's id; without, the key's own team. */
  const run = (team: string | undefined, fn: (control: ControlClient, teamID: string | undefined) => Promise<void>) =>
    team === undefined ? ownTeam((control) => fn(control, undefined)) : asAdmin(async (control) => fn(control, (await findTeam(control, team)).teamID));
  const teamOption = ['--team <team>', "a team's keys (by id or name), with the admin credential; default: the team of the key in use"] as const;

  keys
    .command('create')
    .description('Create an API key and print it (once)')
    .addOption(new Option('--name <name>', 'a label for the key').default('cli'))
    .option(...teamOption)
    .option('--json', 'print as JSON')
    .action((o: { name: string; team?: string; json?: boolean }) =>
      run(o.team, async (control, teamID) => {
        const created: CreatedTeamAPIKey = teamID ? await control.createTeamApiKey(teamID, { name: o.name }) : await control.createApiKey({ name: o.name });
        if (o.json) return printJson({ id: created.id, name: created.name, key: created.key });
        process.stdout.write(`${created.key}\n`);
        process.stderr.write(`created key ${created.id} ('${created.name}'); it is shown only now\n`);
      }),
    );

  keys
    .command('list')
    .description('List API keys (their ids and masked values)')
    .option(...teamOption)
    .option('--json', 'print as JSON')
    .action((o: { team?: string; json?: boolean }) =>
      run(o.team, async (control, teamID) => {
        const list = teamID ? await control.listTeamApiKeys(teamID) : await control.listApiKeys();
        if (o.json) return printJson(list);
        process.stdout.write(table(['id', 'name', 'key', 'created', 'last used'], list.map((k) => [k.id, k.name, masked(k), k.createdAt, k.lastUsed ?? '-'])));
      }),
    );

  keys
    .command('rename <id> <name>')
    .description('Give an API key a new name')
    .action((id: string, name: string) => ownTeam((control) => control.renameApiKey(id, { name })));

  keys
    .command('revoke <id>')
    .description('Delete an API key (the last one cannot be)')
    .option(...teamOption)
    .action((id: string, o: { team?: string }) =>
      run(o.team, async (control, teamID) => {
        await (teamID ? control.deleteTeamApiKey(teamID, id) : control.deleteApiKey(id)).catch((err: unknown) => {
          if ((err as { status?: number }).status === 404) throw new CliError(`no API key has id '${id}'`, EXIT.notFound, 'see `paddock keys list`');
          throw err;
        });
      }),
    );

  keys
    .command('current')
    .description('Print the key the local CLI uses (saved by the first start); needs no server')
    .action(() => {
      const h = home();
      const key = readCredentials(h).apiKey;
      if (!key) throw new CliError(`no key is saved in ${h}/credentials.json`, EXIT.notFound, 'run `paddock start` (the first start saves one) or `paddock keys create`');
      process.stdout.write(`${key}\n`);
    });
}
