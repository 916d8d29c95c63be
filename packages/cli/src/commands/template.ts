// `paddock template ...`: templates of a Paddock server.
import type { Command } from 'commander';
import { controlCommands } from '../control.js';
import { printJson, style, table } from '../output.js';

export function registerTemplateCommands(root: Command, home: () => string): void {
  const template = root.command('template').description('Inspect templates (sandboxes start from them; snapshots make new ones)');
  const run = controlCommands(template, home);

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
