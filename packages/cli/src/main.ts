#!/usr/bin/env -S node --initial-old-space-size=64
// paddock: runs the Paddock service on this machine and works with sandboxes.
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { resolveServerConfig } from '@paddock/server';
import { showConfig } from './commands/config.js';
import { doctor } from './commands/doctor.js';
import { registerKeyCommands } from './commands/keys.js';
import { registerTeamCommands } from './commands/team.js';
import { registerSandboxCommands } from './commands/sandbox.js';
import { registerServiceCommands } from './commands/service.js';
import { start } from './commands/start.js';
import { registerTemplateCommands } from './commands/template.js';
import { uninstall } from './commands/uninstall.js';
import { paddockHome } from './credentials.js';
import { CliError, EXIT, printError } from './output.js';

const VERSION = '0.1.0';

export function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`'${value}' is not a port number`);
  return n;
}

export function count(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`'${value}' is not a whole number`);
  return n;
}

interface NetworkFlags {
  /** commander's --no-network: false when given. */
  network?: boolean;
  uplink?: string;
  dns?: string[];
  allowPrivate?: string[];
  sandboxSubnet?: string;
}

function program(): Command {
  const root = new Command('paddock')
    .description('Run untrusted code in sandboxes on this machine.')
    .version(VERSION)
    .option('--home <dir>', 'data directory (default: $PADDOCK_HOME, else /var/lib/paddock for root, else ~/.paddock)')
    .option('--config <file>', "the server's YAML configuration file (default: $PADDOCK_CONFIG); flags and PADDOCK_* variables override it")
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();

  const configFile = () => root.opts<{ config?: string }>().config;
  /** The data directory: --home, else $PADDOCK_HOME, else the configuration file's, else the default. */
  const home = () => {
    const flag = root.opts<{ home?: string }>().home;
    return flag || process.env.PADDOCK_HOME || !configFile() ? paddockHome(flag) : resolveServerConfig({ configFile: configFile() }).home;
  };
  const serverAddresses = (o: { apiHost?: string; apiPort?: number; proxyHost?: string; proxyPort?: number } & NetworkFlags) => {
    const { network, uplink, dns, allowPrivate, sandboxSubnet, ...addresses } = o;
    const c = resolveServerConfig({
      home: home(),
      ...(configFile() ? { configFile: configFile() } : {}),
      ...Object.fromEntries(Object.entries(addresses).filter(([, v]) => v !== undefined)),
      ...(network === false ? { network: false } : {}),
      ...(uplink ? { uplink } : {}),
      ...(dns ? { dns } : {}),
      ...(allowPrivate ? { allowedPrivate: allowPrivate } : {}),
      ...(sandboxSubnet ? { sandboxSubnet } : {}),
    });
    return {
      home: c.home,
      apiHost: c.apiHost,
      apiPort: c.apiPort,
      proxyHost: c.proxyHost,
      proxyPort: c.proxyPort,
      network: { enabled: c.network, uplink: c.uplink, dns: c.dns, allowedPrivate: c.allowedPrivate, subnet: c.sandboxSubnet },
      sandboxDomain: c.domain,
      ...(c.ociRuntime ? { ociRuntime: c.ociRuntime } : {}),
      configFile: c.configFile,
    };
  };
  /** The sandbox network's settings, on start and doctor alike (each also read from PADDOCK_*). */
  const networkOptions = (cmd: Command) =>
    cmd
      .option('--no-network', 'sandboxes get loopback only (PADDOCK_NETWORK=off)')
      .option('--uplink <interface>', 'interface sandbox traffic goes out of (PADDOCK_UPLINK; default: that of the default route)')
      .option('--dns <server...>', "DNS servers the sandboxes' resolver asks (PADDOCK_DNS; default: the host's)")
      .option('--allow-private <cidr...>', 'private ranges sandboxes may reach, their rules permitting (PADDOCK_ALLOW_PRIVATE)')
      .option('--sandbox-subnet <cidr>', "the sandboxes' subnet, a /30 each (PADDOCK_SANDBOX_SUBNET; default: a free /20 of 10.208.0.0/12)");

  const startCommand = root
    .command('start')
    .description('Run the whole service here: control API, sandbox proxy and runtime (Ctrl-C stops it; sandboxes keep running)')
    .option('--api-host <host>', 'address of the control API (default 127.0.0.1)')
    .option('--api-port <port>', 'port of the control API (default 3000)', port)
    .option('--proxy-host <host>', 'address of the sandbox proxy (default 127.0.0.1)')
    .option('--proxy-port <port>', 'port of the sandbox proxy (default 3001)', port)
    .option('--domain <domain>', 'domain of sandbox hosts, {port}-{id}.<domain> (default localhost:<proxy port>)')
    .option('--warm-pool <n>', 'ready sandboxes kept for fast creates (default 2, 0 disables)', count)
    .option('--warm-pool-templates <template...>', 'templates that get a warm pool, with their start command running (default base code-interpreter-v1)')
    .option('--base-image <ref>', 'make the base template from this image (registry/name:tag) instead of building Debian with mmdebstrap')
    .option('--insecure-registry <host:port...>', 'registries to reach over plain HTTP (loopback ones always are)')
    .option('--log-level <level>', 'the least severe log lines written: fatal, error, warn, info, debug, trace, silent (default info)')
    .option('--tls-cert <file>', 'serve the API and the proxy over TLS with this PEM certificate (chain), for api.<domain> and *.<domain>; SIGHUP reads it again')
    .option('--tls-key <file>', "the certificate's PEM private key")
    .option('--json', 'print the addresses (and a new key) as JSON once ready');
  networkOptions(startCommand).action(
    async (
      o: {
        apiHost?: string;
        apiPort?: number;
        proxyHost?: string;
        proxyPort?: number;
        domain?: string;
        warmPool?: number;
        warmPoolTemplates?: string[];
        baseImage?: string;
        insecureRegistry?: string[];
        logLevel?: string;
        tlsCert?: string;
        tlsKey?: string;
        json?: boolean;
      } & NetworkFlags,
    ) => {
      const { domain, warmPool, warmPoolTemplates, baseImage, insecureRegistry, logLevel, tlsCert, tlsKey, json, ...rest } = o;
      await start({ ...serverAddresses(rest), domain, warmPool, warmPoolTemplates, baseImage, insecureRegistries: insecureRegistry, logLevel, tlsCert, tlsKey, json });
    },
  );

  root
    .command('config')
    .description("Print the server's effective configuration and where each value comes from (flag, variable, file, default)")
    .option('--json', 'print it as JSON')
    .action((o: { json?: boolean }) => {
      showConfig({ home: root.opts<{ home?: string }>().home ? home() : undefined, configFile: configFile(), json: o.json });
    });

  const doctorCommand = root
    .command('doctor')
    .description('Check that this machine can run Paddock, and say how to fix what is missing')
    .option('--api-port <port>', 'port the control API will use', port)
    .option('--proxy-port <port>', 'port the sandbox proxy will use', port)
    .option('--json', 'print the checks as JSON');
  networkOptions(doctorCommand).action(async (o: { apiPort?: number; proxyPort?: number; json?: boolean } & NetworkFlags) => {
    const { json, ...rest } = o;
    await doctor({ ...serverAddresses(rest), json });
  });

  registerKeyCommands(root, home);
  registerTeamCommands(root, home);
  registerServiceCommands(root, home, configFile);
  registerSandboxCommands(root, home);
  registerTemplateCommands(root, home);

  root
    .command('uninstall')
    .description('Destroy every sandbox and remove what Paddock put on this machine: its mounts, cgroups and data directory (refused while a server runs)')
    .option('--yes', 'remove it; without this, only say what would go')
    .option('--json', 'print what was removed as JSON')
    .action(async (o: { yes?: boolean; json?: boolean }) => {
      await uninstall(home(), o);
    });
  return root;
}

async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are "errors" to commander; they already printed.
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof CliError) {
      printError(err);
      return err.exitCode;
    }
    printError(new CliError(err instanceof Error ? err.message : String(err)));
    return EXIT.failure;
  }
}

const code = await main(process.argv);
// Exit once stdout is flushed (a pipe is written asynchronously), without
// waiting for idle keep-alive connections to time out.
process.stdout.write('', () => process.exit(code));
