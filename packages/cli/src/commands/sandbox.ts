// `paddock sandbox ...`: sandboxes of a Paddock server, through @paddock/sdk.
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { ControlClient } from '@paddock/control-client';
import { CommandExitError, Sandbox, type SandboxInfo } from '@paddock/sdk';
import { cliError, connection, controlError, type ClientFlags } from '../control.js';
import { CliError, EXIT, printJson, style, table } from '../output.js';

export function keyValues(flag: string) {
  return (value: string, previous: Record<string, string> = {}): Record<string, string> => {
    const i = value.indexOf('=');
    if (i <= 0) throw new InvalidArgumentError(`'${value}' is not ${flag}=VALUE`);
    return { ...previous, [value.slice(0, i)]: value.slice(i + 1) };
  };
}

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`'${value}' is not a whole number of seconds`);
  return n;
}

/** Quotes words for `bash -c` so that the command runs exactly as typed. */
export function shellJoin(words: string[]): string {
  return words.map((w) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

const when = (d: Date) => d.toISOString().replace(/\.\d+Z$/, 'Z');

function infoJson(s: SandboxInfo) {
  return {
    sandboxId: s.sandboxId,
    templateId: s.templateId,
    state: s.state,
    startedAt: s.startedAt.toISOString(),
    endAt: s.endAt.toISOString(),
    cpuCount: s.cpuCount,
    memoryMB: s.memoryMB,
    metadata: s.metadata,
    network: networkOf(s),
  };
}

/** What a sandbox may reach: its egress rules, with the server's default (internet access) filled in. */
function networkOf(s: SandboxInfo) {
  return { allowInternetAccess: s.allowInternetAccess ?? true, allowOut: s.network?.allowOut ?? [], denyOut: s.network?.denyOut ?? [] };
}

function networkRows(n: ReturnType<typeof networkOf>): Array<[string, string]> {
  const list = (l: string[]) => (l.length ? l.join(', ') : style.dim('none'));
  return [
    ['internet', n.allowInternetAccess ? 'allowed' : 'none'],
    ['allow out', list(n.allowOut)],
    ['deny out', list(n.denyOut)],
  ];
}

/** A repeatable flag whose values may also be comma-separated. */
const entries = (value: string, previous: string[] = []): string[] => [...previous, ...value.split(',').map((e) => e.trim()).filter(Boolean)];

interface NetworkFlags {
  allowOut?: string[];
  denyOut?: string[];
  /** commander's --no-internet: false when given. */
  internet?: boolean;
}

const ALLOW_OUT = 'CIDR blocks, addresses or domains (*.example.com) it may reach; repeatable or comma-separated';
const DENY_OUT = 'CIDR blocks or addresses it may not reach (0.0.0.0/0: all but --allow-out); repeatable or comma-separated';

export function registerSandboxCommands(root: Command, home: () => string): void {
  const sandbox = root
    .command('sandbox')
    .alias('sbx')
    .description('Create, inspect and use sandboxes')
    .option('--api-url <url>', 'control API (default: $PADDOCK_API_URL, or the local server)')
    .option('--api-key <key>', 'API key (default: $PADDOCK_API_KEY, or the one the local server saved)')
    .option('--sandbox-url <url>', 'sandbox proxy (default: $PADDOCK_SANDBOX_URL, or the local server)');

  const conn = () => connection(home(), sandbox.opts<ClientFlags>());
  /** Runs an action, mapping its failures to CLI errors. */
  const act = <A extends unknown[]>(fn: (c: ReturnType<typeof conn>, ...args: A) => Promise<void>) => async (...args: A) => {
    const c = conn();
    try {
      await fn(c, ...args);
    } catch (err) {
      throw cliError(err, c.apiUrl);
    }
  };

  sandbox
    .command('create')
    .description('Create a sandbox and print its id')
    .option('-t, --template <template>', 'template id or name', 'base')
    .option('--timeout <seconds>', 'seconds until it expires (default: the server\'s, 300)', seconds)
    .option('-m, --metadata <key=value>', 'metadata, repeatable', keyValues('KEY'))
    .option('-e, --env <NAME=value>', 'environment variable of every process, repeatable', keyValues('NAME'))
    .option('--allow-out <entries>', ALLOW_OUT, entries)
    .option('--deny-out <entries>', DENY_OUT, entries)
    .option('--no-internet', 'no egress at all')
    .option('--json', 'print the sandbox as JSON')
    .action(
      act(async (c, o: { template: string; timeout?: number; metadata?: Record<string, string>; env?: Record<string, string>; json?: boolean } & NetworkFlags) => {
        const s = await Sandbox.create(o.template, {
          ...c,
          metadata: o.metadata,
          envs: o.env,
          ...(o.timeout !== undefined ? { timeoutMs: o.timeout * 1000 } : {}),
          ...(o.internet === false ? { allowInternetAccess: false } : {}),
          ...(o.allowOut || o.denyOut ? { network: { allowOut: o.allowOut, denyOut: o.denyOut } } : {}),
        });
        if (o.json) printJson({ ...infoJson(await s.getInfo()), domain: s.sandboxDomain });
        else process.stdout.write(`${s.sandboxId}\n`);
      }),
    );

  sandbox
    .command('list')
    .alias('ls')
    .description('List running and paused sandboxes')
    .option('--state <states>', 'running, paused or both (comma-separated)', 'running,paused')
    .option('-m, --metadata <key=value>', 'only sandboxes with this metadata, repeatable', keyValues('KEY'))
    .option('--json', 'print as JSON')
    .action(
      act(async (c, o: { state: string; metadata?: Record<string, string>; json?: boolean }) => {
        const states = o.state.split(',').map((x) => x.trim());
        for (const st of states) if (st !== 'running' && st !== 'paused') throw new CliError(`--state '${st}' is not running or paused`, EXIT.usage);
        const all: SandboxInfo[] = [];
        for await (const s of Sandbox.list({ ...c, query: { state: states as Array<'running' | 'paused'>, metadata: o.metadata } })) all.push(s);
        if (o.json) return printJson(all.map(infoJson));
        if (all.length === 0) return void process.stdout.write(style.dim('no sandboxes\n'));
        process.stdout.write(
          table(
            ['id', 'template', 'state', 'started', 'expires', 'metadata'],
            all.map((s) => [
              s.sandboxId,
              s.templateId,
              s.state === 'running' ? style.green(s.state) : style.yellow(s.state),
              when(s.startedAt),
              when(s.endAt),
              Object.entries(s.metadata)
                .map(([k, v]) => `${k}=${v}`)
                .join(' '),
            ]),
          ),
        );
      }),
    );

  sandbox
    .command('info <id>')
    .description('Show one sandbox')
    .option('--json', 'print as JSON')
    .action(
      act(async (c, id: string, o: { json?: boolean }) => {
        const s = await Sandbox.getInfo(id, c);
        if (o.json) return printJson(infoJson(s));
        const rows: Array<[string, string]> = [
          ['id', s.sandboxId],
          ['template', s.templateId],
          ['state', s.state],
          ['started', when(s.startedAt)],
          ['expires', when(s.endAt)],
          ['cpus', String(s.cpuCount)],
          ['memory', `${s.memoryMB} MiB`],
          ['metadata', JSON.stringify(s.metadata)],
          ...networkRows(networkOf(s)),
        ];
        process.stdout.write(rows.map(([k, v]) => `${style.bold(k.padEnd(9))} ${v}`).join('\n') + '\n');
      }),
    );

  sandbox
    .command('network <id>')
    .description("Replace a sandbox's egress rules, live (what is not given is cleared, as in the API), and show them")
    .option('--allow-out <entries>', ALLOW_OUT, entries)
    .option('--deny-out <entries>', DENY_OUT, entries)
    .option('--no-internet', 'no egress at all')
    .option('--json', 'print the rules in force as JSON')
    .action(
      act(async (c, id: string, o: NetworkFlags & { json?: boolean }) => {
        await Sandbox.updateNetwork(id, { allowOut: o.allowOut, denyOut: o.denyOut, ...(o.internet === false ? { allowInternetAccess: false } : {}) }, c);
        const now = networkOf(await Sandbox.getInfo(id, c));
        if (o.json) return printJson(now);
        process.stdout.write(networkRows(now).map(([k, v]) => `${style.bold(k.padEnd(9))} ${v}`).join('\n') + '\n');
      }),
    );

  sandbox
    .command('kill <ids...>')
    .description('Kill sandboxes')
    .action(
      act(async (c, ids: string[]) => {
        const missing: string[] = [];
        for (const id of ids) if (!(await Sandbox.kill(id, c))) missing.push(id);
        if (missing.length) throw new CliError(`no sandbox ${missing.join(', ')}`, EXIT.notFound);
      }),
    );

  sandbox
    .command('exec <id> <command...>')
    .description('Run a command in a sandbox (put it after --); exits with its exit code')
    .option('-u, --user <user>', 'user to run as', 'user')
    .option('-C, --cwd <dir>', 'working directory')
    .option('-e, --env <NAME=value>', 'environment variable, repeatable', keyValues('NAME'))
    .option('--timeout <seconds>', 'end the command after this long (0: never)', seconds, 0)
    .action(
      act(async (c, id: string, words: string[], o: { user: string; cwd?: string; env?: Record<string, string>; timeout: number }) => {
        const s = await Sandbox.connect(id, c);
        try {
          await s.commands.run(shellJoin(words), {
            user: o.user,
            cwd: o.cwd,
            envs: o.env,
            timeoutMs: o.timeout * 1000,
            onStdout: (d) => void process.stdout.write(d),
            onStderr: (d) => void process.stderr.write(d),
          });
        } catch (err) {
          if (err instanceof CommandExitError) {
            process.exitCode = err.exitCode > 0 && err.exitCode < 256 ? err.exitCode : EXIT.failure;
            throw new ExitWith(process.exitCode);
          }
          throw err;
        }
      }),
    );

  sandbox
    .command('shell <id>')
    .description('Open an interactive terminal in a sandbox')
    .option('-u, --user <user>', 'user to log in as', 'user')
    .action(
      act(async (c, id: string, o: { user: string }) => {
        if (!process.stdin.isTTY || !process.stdout.isTTY) throw new CliError('shell needs a terminal on stdin and stdout', EXIT.usage, 'use `paddock sandbox exec` to run commands without one');
        const s = await Sandbox.connect(id, c);
        const size = () => ({ cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });
        const term = await s.pty.create({ ...size(), user: o.user, timeoutMs: 0, onData: (d) => void process.stdout.write(d) });
        const onInput = (d: Buffer) => void s.pty.sendInput(term.pid, d).catch(() => undefined);
        const onResize = () => void s.pty.resize(term.pid, size()).catch(() => undefined);
        process.stdin.setRawMode(true);
        process.stdin.on('data', onInput);
        process.stdout.on('resize', onResize);
        let code = 0;
        try {
          await term.wait();
        } catch (err) {
          if (!(err instanceof CommandExitError)) throw err;
          code = err.exitCode > 0 && err.exitCode < 256 ? err.exitCode : EXIT.failure;
        } finally {
          process.stdin.off('data', onInput);
          process.stdout.off('resize', onResize);
          process.stdin.setRawMode(false);
          process.stdin.pause();
        }
        if (code) throw new ExitWith(code);
      }),
    );

  sandbox
    .command('logs <id>')
    .description('Show the lifecycle log of a sandbox')
    .option('--json', 'print as JSON')
    .action(
      act(async (c, id: string, o: { json?: boolean }) => {
        const { logs } = await new ControlClient({ apiUrl: c.apiUrl, apiKey: c.apiKey }).getSandboxLogs(id, {}).catch((err: unknown) => {
          throw controlError(err);
        });
        if (o.json) return printJson(logs);
        for (const l of logs) process.stdout.write(`${style.dim(l.timestamp)} ${l.level.padEnd(5)} ${l.message}\n`);
      }),
    );

  sandbox
    .command('metrics <id>')
    .description('Show the resource usage samples of a sandbox')
    .option('--json', 'print as JSON')
    .action(
      act(async (c, id: string, o: { json?: boolean }) => {
        const samples = await Sandbox.getMetrics(id, c);
        if (o.json) return printJson(samples.map((m) => ({ ...m, timestamp: m.timestamp.toISOString() })));
        const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
        process.stdout.write(
          table(
            ['time', 'cpu', 'memory', 'disk'],
            samples.map((m) => [when(m.timestamp), `${m.cpuUsedPct.toFixed(1)}% of ${m.cpuCount}`, `${mib(m.memUsed)} / ${mib(m.memTotal)}`, `${mib(m.diskUsed)}`]),
          ),
        );
      }),
    );
}

/** Ends the CLI with a given code and nothing more to print. */
export class ExitWith extends CliError {
  constructor(code: number) {
    super('', code);
  }
}
