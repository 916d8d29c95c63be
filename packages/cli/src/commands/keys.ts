// `paddock keys`: API keys of a Paddock server, through its control API (the
// server keeps them as hashes; a key's value is shown once, when created).
import type { Command } from 'commander';
import { Option } from 'commander';
import type { TeamAPIKey } from '@paddock/control-client';
import { controlCommands } from '../control.js';
import { readCredentials } from '../credentials.js';
import { CliError, EXIT, printJson, table } from '../output.js';

const masked = (k: TeamAPIKey) => `${k.mask.prefix}${k.mask.maskedValuePrefix}…${k.mask.maskedValueSuffix}`;

export function registerKeyCommands(root: Command, home: () => string): void {
  const keys = root.command('keys').description('API keys of a Paddock server (it must be running)');
  const run = controlCommands(keys, home);

  keys
    .command('create')
    .description('Create an API key and print it (once)')
    .addOption(new Option('--name <name>', 'a label for the key').default('cli'))
    .option('--json', 'print as JSON')
    .action((o: { name: string; json?: boolean }) =>
      run(async (control) => {
        const created = await control.createApiKey({ name: o.name });
        if (o.json) return printJson({ id: created.id, name: created.name, key: created.key });
        process.stdout.write(`${created.key}\n`);
        process.stderr.write(`created key ${created.id} ('${created.name}'); it is shown only now\n`);
      }),
    );

  keys
    .command('list')
    .description('List API keys (their ids and masked values)')
    .option('--json', 'print as JSON')
    .action((o: { json?: boolean }) =>
      run(async (control) => {
        const list = await control.listApiKeys();
        if (o.json) return printJson(list);
        process.stdout.write(table(['id', 'name', 'key', 'created', 'last used'], list.map((k) => [k.id, k.name, masked(k), k.createdAt, k.lastUsed ?? '-'])));
      }),
    );

  keys
    .command('rename <id> <name>')
    .description('Give an API key a new name')
    .action((id: string, name: string) => run((control) => control.renameApiKey(id, { name })));

  keys
    .command('revoke <id>')
    .description('Delete an API key (the last one cannot be)')
    .action((id: string) =>
      run(async (control) => {
        await control.deleteApiKey(id).catch((err: unknown) => {
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
