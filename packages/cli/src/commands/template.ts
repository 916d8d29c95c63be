// `paddock template ...`: templates of a Paddock server.
import type { Command } from 'commander';
import { ControlClient } from '@paddock/control-client';
import { CliError, printJson, style, table } from '../output.js';
import { cliError, connection, controlError } from './sandbox.js';

export function registerTemplateCommands(root: Command, home: () => string): void {
  const template = root
    .command('template')
    .description('Inspect templates (sandboxes start from them; snapshots make new ones)')
    .option('--api-url <url>', 'control API (default: $PADDOCK_API_URL, or the local server)')
    .option('--api-key <key>', 'API key (default: $PADDOCK_API_KEY, or the one the local server saved)');

  const client = () => {
    const c = connection(home(), template.opts<{ apiUrl?: string; apiKey?: string }>());
    return { c, control: new ControlClient({ apiUrl: c.apiUrl, apiKey: c.apiKey }) };
  };
  const run = async (fn: (control: ControlClient) => Promise<void>) => {
    const { c, control } = client();
    try {
      await fn(control);
    } catch (err) {
      const mapped = controlError(err);
      throw mapped instanceof CliError ? mapped : cliError(mapped, c.apiUrl);
    }
  };

  template
    .command('list')
    .alias('ls')
    .description('List templates')
    .option('--json', 'print as JSON')
    .action((o: { json?: boolean }) =>
      run(async (control) => {
        const list = await control.listTemplates({});
        if (o.json) return printJson(list);
        process.stdout.write(
          table(
            ['id', 'names', 'cpus', 'memory', 'builds', 'spawned', 'created'],
            list.map((t) => [t.templateID, t.names.join(', '), String(t.cpuCount), `${t.memoryMB} MiB`, String(t.buildCount), String(t.spawnCount), t.createdAt]),
          ),
        );
      }),
    );

  template
    .command('info <template>')
    .description('Show a template and its builds')
    .option('--json', 'print as JSON')
    .action((ref: string, o: { json?: boolean }) =>
      run(async (control) => {
        const { template: t } = await control.getTemplate(ref, {});
        if (o.json) return printJson(t);
        process.stdout.write(
          [
            `${style.bold('id'.padEnd(9))} ${t.templateID}`,
            `${style.bold('names'.padEnd(9))} ${t.names.join(', ') || '-'}`,
            `${style.bold('public'.padEnd(9))} ${t.public}`,
            `${style.bold('spawned'.padEnd(9))} ${t.spawnCount} times${t.lastSpawnedAt ? `, last ${t.lastSpawnedAt}` : ''}`,
            '',
          ].join('\n'),
        );
        process.stdout.write(table(['build', 'status', 'cpus', 'memory', 'envd', 'created'], t.builds.map((b) => [b.buildID, b.status, String(b.cpuCount), `${b.memoryMB} MiB`, b.envdVersion ?? '-', b.createdAt])));
      }),
    );

}
