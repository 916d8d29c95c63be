// `paddock doctor`: what this machine lacks to run Paddock, and the fixes.
import { runDoctor, type Check, type DoctorOptions } from '../doctor.js';
import { CliError, EXIT, printJson, style, table } from '../output.js';

export function failuresText(failed: Check[]): string {
  return failed.map((c) => `  ${c.name}: ${c.detail}\n    fix: ${c.fix ?? '(none known)'}`).join('\n');
}

export async function doctor(opts: DoctorOptions & { json?: boolean }): Promise<void> {
  const checks = await runDoctor(opts);
  const failed = checks.filter((c) => !c.ok && !c.warning);
  if (opts.json) {
    printJson({ ok: failed.length === 0, checks });
  } else {
    const mark = (c: Check) => (c.ok ? style.green('ok') : c.warning ? style.yellow('warn') : style.red('FAIL'));
    process.stdout.write(table(['check', '', 'found', 'fix'], checks.map((c) => [c.name, mark(c), c.detail, c.ok ? '' : (c.fix ?? '')])));
  }
  if (failed.length) throw new CliError(`${failed.length} check${failed.length > 1 ? 's' : ''} failed: ${failed.map((c) => c.name).join(', ')}`, EXIT.prerequisite);
}
