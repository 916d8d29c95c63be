// `paddock start`: the whole service on this machine, with embedded
// defaults, until Ctrl-C. Sandboxes outlive it and are adopted next time.
import { execFileSync } from 'node:child_process';
import { createLogger, resolveServerConfig, startServer, type LogLevel } from '@paddock/server';
import pretty from 'pino-pretty';
import { readCredentials, writeCredentials } from '../credentials.js';
import { isDebianLike, runDoctor, type Check, type DoctorOptions } from '../doctor.js';
import { CliError, EXIT, printJson, style } from '../output.js';
import { failuresText } from './doctor.js';

export interface StartFlags extends DoctorOptions {
  domain?: string;
  warmPool?: number;
  warmPoolTemplates?: string[];
  baseImage?: string;
  insecureRegistries?: string[];
  logLevel?: string;
  tlsCert?: string;
  tlsKey?: string;
  /** The server's configuration file, under the flags and PADDOCK_* variables. */
  configFile?: string;
  json?: boolean;
}

function log(msg: string, json: boolean | undefined): void {
  // With --json, stdout carries only the JSON object; people still see progress on stderr.
  (json ? process.stderr : process.stdout).write(msg + '\n');
}

/**
 * Installs, with apt-get, the Debian packages of the checks that failed and
 * name one. What only a warning asks for (resolving `*.localhost`) does not
 * stop the start when it cannot be installed.
 */
function installMissing(checks: Check[], json?: boolean): boolean {
  const wanted = checks.filter((c): c is Check & { package: string } => !c.ok && c.package !== undefined);
  if (wanted.length === 0 || process.getuid?.() !== 0 || !isDebianLike()) return false;
  const packages = wanted.map((c) => c.package);
  if (wanted.every((c) => c.warning)) {
    try {
      install(packages, json);
    } catch (err) {
      log(`${style.yellow('warning')}: could not install ${packages.join(', ')}: ${(err as Error).message}`, json);
    }
    return true;
  }
  install(packages, json);
  return true;
}

function install(packages: string[], json?: boolean): void {
  log(`${packages.join(' and ')} missing; installing with apt-get install -y ${packages.join(' ')}`, json);
  const apt = (args: string[]) => execFileSync('apt-get', args, { stdio: json ? ['ignore', 'ignore', 'inherit'] : 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    apt(['install', '-y', '-q', ...packages]);
  } catch {
    apt(['update', '-q']);
    apt(['install', '-y', '-q', ...packages]);
  }
}

export async function start(flags: StartFlags): Promise<void> {
  let checks = await runDoctor(flags);
  if (installMissing(checks, flags.json)) checks = await runDoctor(flags);
  const failed = checks.filter((c) => !c.ok && !c.warning);
  for (const w of checks.filter((c) => !c.ok && c.warning)) log(`${style.yellow('warning')}: ${w.name}: ${w.detail}`, flags.json);
  if (failed.length) throw new CliError(`this machine cannot run Paddock yet:\n${failuresText(failed)}`, EXIT.prerequisite, 'fix the above, then run `paddock start` again (`paddock doctor` checks without starting)');

  log(style.dim(`starting Paddock in ${flags.home}`), flags.json);
  // The server logs JSON lines; on a terminal, readable ones. With --json, stdout carries only the JSON object.
  const to = flags.json ? process.stderr : process.stdout;
  const { logLevel, logFile } = resolveServerConfig({ home: flags.home, configFile: flags.configFile, ...(flags.logLevel ? { logLevel: flags.logLevel as LogLevel } : {}) });
  const logger =
    !logFile && to.isTTY
      ? createLogger({ level: logLevel, destination: pretty({ destination: to.fd, colorize: true, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname', sync: true }) })
      : createLogger({ level: logLevel, destination: logFile ?? (flags.json ? 2 : 1) });
  const server = await startServer({
    logger,
    ...(flags.configFile ? { configFile: flags.configFile } : {}),
    ...(flags.logLevel ? { logLevel: flags.logLevel as LogLevel } : {}),
    ...(flags.tlsCert ? { tlsCert: flags.tlsCert } : {}),
    ...(flags.tlsKey ? { tlsKey: flags.tlsKey } : {}),
    home: flags.home,
    apiHost: flags.apiHost,
    apiPort: flags.apiPort,
    proxyHost: flags.proxyHost,
    proxyPort: flags.proxyPort,
    ...(flags.domain ? { domain: flags.domain } : {}),
    ...(flags.warmPool !== undefined ? { warmPoolSize: flags.warmPool } : {}),
    ...(flags.warmPoolTemplates?.length ? { warmPoolTemplates: flags.warmPoolTemplates } : {}),
    ...(flags.baseImage ? { baseImage: flags.baseImage } : {}),
    ...(flags.insecureRegistries?.length ? { insecureRegistries: flags.insecureRegistries } : {}),
    ...(flags.network
      ? { network: flags.network.enabled, uplink: flags.network.uplink, dns: flags.network.dns, allowedPrivate: flags.network.allowedPrivate, sandboxSubnet: flags.network.subnet }
      : {}),
    onProgress: (m) => log(`  ${style.cyan('•')} ${m}`, flags.json),
  });
  const saved = readCredentials(flags.home);
  const apiKey = server.createdApiKey ?? saved.apiKey;
  const adminKey = server.createdAdminKey ?? saved.adminKey;
  if (apiKey) writeCredentials(flags.home, { apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl, domain: server.config.domain, apiKey, ...(adminKey ? { adminKey } : {}) });

  if (flags.json) {
    printJson({ apiUrl: server.apiUrl, sandboxUrl: server.proxyUrl, domain: server.config.domain, home: flags.home, ...(server.createdApiKey ? { apiKey: server.createdApiKey } : {}), ...(server.createdAdminKey ? { adminKey: server.createdAdminKey } : {}) });
  } else {
    const keyRef = server.createdApiKey ?? '"$(paddock keys current)"';
    const lines = [
      '',
      `${style.green('Paddock is running.')}`,
      `  control API    ${style.bold(server.apiUrl)}`,
      `  sandbox proxy  ${style.bold(server.proxyUrl)}   (sandbox hosts: {port}-{id}.${server.config.domain})`,
      server.createdApiKey
        ? `  API key        ${style.bold(server.createdApiKey)}\n                 ${style.dim(`shown once; the local CLI keeps a copy in ${flags.home}/credentials.json`)}`
        : `  API key        ${style.dim('the one shown at first start (`paddock keys current` prints it; `paddock keys create` makes another)')}`,
      ...(server.createdAdminKey
        ? [`  admin          ${style.bold(server.createdAdminKey)}\n                 ${style.dim('manages teams and their keys (`paddock team`); shown once, the local CLI keeps a copy')}`]
        : []),
      '',
      style.dim('For @paddock/sdk:'),
      `  export PADDOCK_API_URL=${server.apiUrl}`,
      `  export PADDOCK_SANDBOX_URL=${server.proxyUrl}`,
      `  export PADDOCK_API_KEY=${keyRef}`,
      '',
      style.dim('For the official e2b SDK:'),
      `  export E2B_API_URL=${server.apiUrl}`,
      `  export E2B_SANDBOX_URL=${server.proxyUrl}`,
      `  export E2B_API_KEY=${keyRef}`,
      '',
      style.dim('Ctrl-C stops the server; sandboxes keep running and the next start adopts them.'),
    ];
    process.stdout.write(lines.join('\n') + '\n');
  }

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log(style.dim(`\n${signal}: stopping the server; sandboxes keep running`), flags.json);
      void server.close().then(resolve);
    };
    // A renewed certificate is served from the next connection on; one that cannot be used keeps the old.
    process.on('SIGHUP', () => {
      try {
        server.reloadTls();
      } catch (err) {
        server.log.error({ err }, 'SIGHUP: the TLS certificate was not reloaded');
      }
    });
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
}
