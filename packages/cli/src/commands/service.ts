// `paddock service install|uninstall`: Paddock as a systemd service. The unit
// runs `paddock start` with this Node and this CLI, restarts it when it
// fails, and reloads its certificate on `systemctl reload`. Stopping the
// service stops the server only: sandboxes run in cgroups of their own (not
// the unit's), and the next start adopts them.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { CliError, EXIT, printJson, style } from '../output.js';

export const UNIT_NAME = 'paddock.service';
const DEFAULT_UNIT_DIR = '/etc/systemd/system';
/** Marks a unit file as written by this command, so that uninstall removes only its own. */
const MARK = '# Written by `paddock service install`; `paddock service uninstall` removes it.';

/** A word of ExecStart as systemd reads it: quoted when it holds spaces or quotes. */
const word = (w: string) => (/^[A-Za-z0-9_./:=@+-]+$/.test(w) ? w : `"${w.replace(/(["\\])/g, '\\$1')}"`);

export function unitFile(o: { home: string; configFile?: string; main: string; node: string }): string {
  const start = [o.node, '--initial-old-space-size=64', o.main, '--home', o.home, ...(o.configFile ? ['--config', o.configFile] : []), 'start'];
  return [
    MARK,
    '[Unit]',
    'Description=Paddock sandbox service (control API, sandbox proxy, runtime)',
    'Documentation=https://github.com/paddock/paddock',
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${start.map(word).join(' ')}`,
    'ExecReload=/bin/kill -HUP $MAINPID',
    'Restart=on-failure',
    'RestartSec=2',
    // The server's own processes end with it; sandboxes live in cgroups of their own.
    'KillMode=mixed',
    'TimeoutStopSec=30',
    'LimitNOFILE=1048576',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

interface ServiceFlags {
  unitDir?: string;
  enable?: boolean;
  json?: boolean;
}

function systemctl(args: string[]): { ok: boolean; output: string } {
  try {
    return { ok: true, output: execFileSync('systemctl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    return { ok: false, output: (e.stderr || e.message).trim() };
  }
}

/** Whether systemd runs this machine (it does not in most containers). */
const systemdRuns = () => existsSync('/run/systemd/system');

export function registerServiceCommands(root: Command, home: () => string, configFile: () => string | undefined): void {
  const service = root.command('service').description('Run Paddock as a systemd service');
  service
    .command('install')
    .description(`Write the systemd unit ${UNIT_NAME} (paddock start with this data directory and --config), and enable and start it`)
    .option('--unit-dir <dir>', 'where the unit goes', DEFAULT_UNIT_DIR)
    .option('--no-enable', 'only write the unit')
    .option('--json', 'print what was done as JSON')
    .action((o: ServiceFlags) => install(home(), configFile(), o));
  service
    .command('uninstall')
    .description(`Stop and disable ${UNIT_NAME} and remove its unit (sandboxes and data stay; \`paddock uninstall\` removes those)`)
    .option('--unit-dir <dir>', 'where the unit is', DEFAULT_UNIT_DIR)
    .option('--json', 'print what was done as JSON')
    .action((o: ServiceFlags) => removeService(o));
}

function install(home: string, configFile: string | undefined, o: ServiceFlags): void {
  const dir = resolve(o.unitDir ?? DEFAULT_UNIT_DIR);
  const file = join(dir, UNIT_NAME);
  if (existsSync(file) && !readFileSync(file, 'utf8').startsWith(MARK)) {
    throw new CliError(`${file} exists and was not written by paddock service install; remove it first`, EXIT.usage);
  }
  mkdirSync(dir, { recursive: true });
  const main = resolve(process.argv[1] ?? '');
  writeFileSync(file, unitFile({ home, configFile: configFile && resolve(configFile), main, node: process.execPath }), { mode: 0o644 });
  const done: string[] = [`wrote ${file}`];
  let note: string | undefined;
  if (o.enable !== false) {
    if (!systemdRuns()) {
      note = 'systemd does not run this machine: the unit is written but not enabled';
    } else {
      for (const args of [['daemon-reload'], ['enable', '--now', UNIT_NAME]]) {
        const r = systemctl(args);
        if (!r.ok) throw new CliError(`systemctl ${args.join(' ')} failed: ${r.output}`, EXIT.failure);
        done.push(`systemctl ${args.join(' ')}`);
      }
    }
  }
  if (o.json) return printJson({ unit: file, done, ...(note ? { note } : {}) });
  process.stdout.write(`${done.map((d) => `${style.green('✓')} ${d}`).join('\n')}\n${note ? `${style.yellow('note')}: ${note}\n` : ''}`);
}

function removeService(o: ServiceFlags): void {
  const dir = resolve(o.unitDir ?? DEFAULT_UNIT_DIR);
  const file = join(dir, UNIT_NAME);
  if (!existsSync(file)) throw new CliError(`${file} does not exist: the service is not installed there`, EXIT.notFound);
  if (!readFileSync(file, 'utf8').startsWith(MARK)) throw new CliError(`${file} was not written by paddock service install; it is left alone`, EXIT.usage);
  const done: string[] = [];
  if (systemdRuns() && (o.unitDir === undefined || dir === DEFAULT_UNIT_DIR)) {
    const r = systemctl(['disable', '--now', UNIT_NAME]);
    if (!r.ok) throw new CliError(`systemctl disable --now ${UNIT_NAME} failed: ${r.output}`, EXIT.failure);
    done.push(`systemctl disable --now ${UNIT_NAME}`);
  }
  rmSync(file);
  done.push(`removed ${file}`);
  if (systemdRuns()) {
    systemctl(['daemon-reload']);
    done.push('systemctl daemon-reload');
  }
  if (o.json) return printJson({ unit: file, done });
  process.stdout.write(`${done.map((d) => `${style.green('✓')} ${d}`).join('\n')}\n`);
}
