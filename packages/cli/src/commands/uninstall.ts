// `paddock uninstall`: removes the installation in the data directory:
// every sandbox, what the runtime put on the host, and Paddock's files.
import { inspectInstallation, uninstall as removeInstallation, type Installation } from '@paddock/server';
import { CliError, EXIT, printJson, style } from '../output.js';

export interface UninstallFlags {
  yes?: boolean;
  json?: boolean;
}

function describe(found: Installation): string {
  const n = found.sandboxes.length;
  const lines = [
    n === 0 ? 'no sandboxes' : `${n} sandbox${n === 1 ? '' : 'es'} (${found.sandboxes.join(', ')}), with the files in them`,
    ...(found.pooled > 0 ? [`${found.pooled} ready sandbox${found.pooled === 1 ? '' : 'es'} of the warm pool`] : []),
    ...(found.entries.length > 0 ? [`in ${found.home}: ${found.entries.join(', ')}`] : []),
  ];
  return lines.map((l) => `  ${l}`).join('\n');
}

export async function uninstall(home: string, flags: UninstallFlags): Promise<void> {
  if (!flags.yes) {
    const found = await inspectInstallation(home);
    if (!found) throw new CliError(`nothing to remove: ${home} does not exist`, EXIT.notFound);
    throw new CliError(`this would remove, for good:\n${describe(found)}`, EXIT.usage, 'run `paddock uninstall --yes` to remove it');
  }
  const removed = await removeInstallation(home);
  if (!removed) throw new CliError(`nothing to remove: ${home} does not exist`, EXIT.notFound);
  const kept = removed.foreign.length > 0;
  if (flags.json) {
    printJson({ ...removed, homeRemoved: !kept });
    return;
  }
  process.stdout.write(`${style.green('Removed')}:\n${describe(removed)}\n`);
  if (kept) process.stdout.write(`${home} stays: it holds what is not Paddock's (${removed.foreign.join(', ')})\n`);
}
