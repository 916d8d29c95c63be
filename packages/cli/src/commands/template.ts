// `paddock template ...`: templates of a Paddock server, and building
// them from a Dockerfile.
import { InvalidArgumentError, type Command } from 'commander';
import type { BuildLogEntry, TemplateBuildInfo } from '@paddock/control-client';
import { controlCommands } from '../control.js';
import { CliError, EXIT, printJson, style, table } from '../output.js';
import { failure, followBuild, formatEntry, importArchive, prepareBuild, runBuild, type BuildOptions } from '../template-build.js';
import { keyValues } from './sandbox.js';

function positive(what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`'${value}' is not a whole number of ${what}`);
    return n;
  };
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The final status of a build, without the last page of its log. */
function statusJson(status: TemplateBuildInfo) {
  const { logs: _logs, logEntries: _entries, ...rest } = status;
  return rest;
}

export function registerTemplateCommands(root: Command, home: () => string): void {
  const template = root.command('template').description('Inspect templates (sandboxes start from them; snapshots make new ones)');
  const run = controlCommands(template, home);

  template
    .command('build [context]')
    .description('Build a template from a Dockerfile: FROM, RUN, COPY/ADD of local files, ENV, WORKDIR, USER, ARG, CMD/ENTRYPOINT')
    .requiredOption('--name <name[:tag]>', 'name of the template (made if new); `:tag` tags the build')
    .option('-f, --file <Dockerfile>', 'the Dockerfile (default: Dockerfile in the context, else e2b.Dockerfile)')
    .option('--tag <tag>', 'a tag for the build, repeatable', collect)
    .option('--build-arg <NAME=value>', 'value of an ARG, repeatable', keyValues('NAME'))
    .option('--cpu <count>', 'CPUs of its sandboxes', positive('CPUs'))
    .option('--memory <MiB>', 'memory of its sandboxes, MiB', positive('MiB'))
    .option('--cmd <command>', 'start command of its sandboxes (instead of CMD/ENTRYPOINT)')
    .option('--ready-cmd <command>', 'command that succeeds once a sandbox is ready (checked by the build too)')
    .option('--no-cache', 'run every step, even those the server has cached')
    .option('--json', 'print the final status as JSON (the log goes to stderr)')
    .action(
      async (
        context: string | undefined,
        o: { name: string; file?: string; tag?: string[]; buildArg?: Record<string, string>; cpu?: number; memory?: number; cmd?: string; readyCmd?: string; cache: boolean; json?: boolean },
      ) => {
        const out = o.json ? process.stderr : process.stdout;
        const opts: BuildOptions = {
          contextDir: context ?? '.',
          name: o.name,
          ...(o.file ? { dockerfile: o.file } : {}),
          ...(o.tag ? { tags: o.tag } : {}),
          ...(o.buildArg ? { buildArgs: o.buildArg } : {}),
          ...(o.cpu !== undefined ? { cpuCount: o.cpu } : {}),
          ...(o.memory !== undefined ? { memoryMB: o.memory } : {}),
          ...(o.cmd ? { startCmd: o.cmd } : {}),
          ...(o.readyCmd ? { readyCmd: o.readyCmd } : {}),
          noCache: !o.cache,
        };
        const notes: string[] = [];
        const prepared = await prepareBuild(opts, notes);
        for (const n of notes) out.write(`${style.yellow('note', out)}: ${n}\n`);
        await run(async (control) => {
          const built = await runBuild(control, opts, prepared, out);
          if (o.json) printJson({ ...statusJson(built.status), names: built.names, tags: built.tags });
          if (built.status.status !== 'ready') throw new CliError(failure(built.buildID, built.status));
          if (!o.json) {
            const tags = built.tags.length > 0 ? ` (tags: ${built.tags.join(', ')})` : '';
            out.write(`${style.green('built', out)} template ${built.names.join(', ')} (${built.templateID}), build ${built.buildID}${tags}\n`);
          }
        });
      },
    );

  template
    .command('import <archive>')
    .description('Make a template from an image archive: what `docker save` writes, or an OCI image layout as a tar')
    .requiredOption('--name <name[:tag]>', 'name of the template (made if new); `:tag` tags the build')
    .option('--tag <tag>', 'a tag for the build, repeatable', collect)
    .option('--cpu <count>', 'CPUs of its sandboxes', positive('CPUs'))
    .option('--memory <MiB>', 'memory of its sandboxes, MiB', positive('MiB'))
    .option('--json', 'print the final status as JSON (the log goes to stderr)')
    .action((archive: string, o: { name: string; tag?: string[]; cpu?: number; memory?: number; json?: boolean }) => {
      const out = o.json ? process.stderr : process.stdout;
      return run(async (control) => {
        const made = await importArchive(control, { archive, name: o.name, tags: o.tag, cpuCount: o.cpu, memoryMB: o.memory }, out);
        if (o.json) printJson({ ...statusJson(made.status), names: made.names, tags: made.tags });
        if (made.status.status !== 'ready') throw new CliError(failure(made.buildID, made.status));
        if (!o.json) out.write(`${style.green('imported', out)} template ${made.names.join(', ')} (${made.templateID}), build ${made.buildID}\n`);
      });
    });

  template
    .command('rebuild <template>')
    .description('Make the base template again: its Debian root filesystem built anew, or its configured image pulled again (sandboxes keep the old one)')
    .option('--json', 'print the final status as JSON (the log goes to stderr)')
    .action((ref: string, o: { json?: boolean }) => {
      const out = o.json ? process.stderr : process.stdout;
      return run(async (control) => {
        const started = await control.rebuildTemplate(ref);
        out.write(`making template ${started.templateID} again, build ${started.buildID}\n`);
        const status = await followBuild(control, started.templateID, started.buildID, { follow: true, onEntry: (e) => out.write(formatEntry(e, out)) });
        if (o.json) printJson(statusJson(status));
        if (status.status !== 'ready') throw new CliError(failure(started.buildID, status));
        if (!o.json) out.write(`${style.green('made again', out)}: template ${started.templateID}, build ${started.buildID}\n`);
      });
    });

  template
    .command('logs <template> [buildID]')
    .description("Print a build's log (the latest build when no id is given)")
    .option('--follow', 'keep printing while the build runs')
    .option('--json', 'print the status and every log entry as JSON')
    .action((ref: string, buildID: string | undefined, o: { follow?: boolean; json?: boolean }) =>
      run(async (control) => {
        const { template: t } = await control.getTemplate(ref, { limit: 1 });
        const id = buildID ?? t.builds[0]?.buildID;
        if (!id) throw new CliError(`template '${ref}' has no builds`, EXIT.notFound);
        const entries: BuildLogEntry[] = [];
        const status = await followBuild(control, t.templateID, id, {
          follow: o.follow === true,
          onEntry: (e) => (o.json ? entries.push(e) : process.stdout.write(formatEntry(e, process.stdout))),
        });
        if (o.json) return printJson({ ...statusJson(status), logEntries: entries });
        if (status.status === 'error') process.stdout.write(`${style.red(failure(id, status))}\n`);
        else process.stdout.write(`${style.dim(`build ${id} is ${status.status}`)}\n`);
      }),
    );

  template
    .command('delete <template>')
    .alias('rm')
    .description('Delete a template, its names, tags and builds (refused while sandboxes run from it)')
    .option('--yes', 'delete it; without this, nothing is deleted')
    .option('--json', 'print what was deleted as JSON')
    .action((ref: string, o: { yes?: boolean; json?: boolean }) =>
      run(async (control) => {
        const { template: t } = await control.getTemplate(ref, {});
        let builds = 0;
        for await (const _ of control.paginateTemplateBuilds(t.templateID)) builds++;
        const what = `template ${t.templateID}${t.names.length > 0 ? ` (${t.names.join(', ')})` : ''} and its ${builds} ${builds === 1 ? 'build' : 'builds'}`;
        if (!o.yes) throw new CliError(`not deleting ${what}`, EXIT.usage, 'pass --yes to delete it');
        await control.deleteTemplate(t.templateID);
        if (o.json) return printJson({ templateID: t.templateID, names: t.names, builds });
        process.stdout.write(`deleted ${what}\n`);
      }),
    );

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
