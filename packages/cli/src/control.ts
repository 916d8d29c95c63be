// How a command reaches a Paddock server: its control API's address and a
// key (flags, then PADDOCK_* variables, then what `paddock start` saved),
// and what its failures mean to a person at the terminal.
import type { Command } from 'commander';
import { ControlClient, type Team } from '@paddock/control-client';
import { AuthenticationError, NotFoundError, SandboxError, type ConnectionOpts } from '@paddock/sdk';
import { readCredentials } from './credentials.js';
import { CliError, EXIT } from './output.js';

export interface ClientFlags {
  apiUrl?: string;
  apiKey?: string;
  sandboxUrl?: string;
}

export type Connection = ConnectionOpts & { apiUrl: string; apiKey: string };

/** Where the server is: flags, then PADDOCK_* variables, then what `paddock start` saved. */
export function connection(home: string, flags: ClientFlags): Connection {
  const saved = readCredentials(home);
  const apiUrl = flags.apiUrl ?? process.env.PADDOCK_API_URL ?? saved.apiUrl ?? 'http://127.0.0.1:3000';
  const apiKey = flags.apiKey ?? process.env.PADDOCK_API_KEY ?? saved.apiKey;
  if (!apiKey) throw new CliError('no API key', EXIT.unreachable, 'pass --api-key, set PADDOCK_API_KEY, or run `paddock start` here once (it saves one)');
  const sandboxUrl = flags.sandboxUrl ?? process.env.PADDOCK_SANDBOX_URL ?? saved.sandboxUrl;
  return { apiUrl, apiKey, ...(sandboxUrl ? { sandboxUrl } : {}) };
}

/** The admin credential: --admin-key, then PADDOCK_ADMIN_KEY, then what the first `paddock start` here saved. */
export function adminConnection(home: string, flags: ClientFlags & { adminKey?: string }): { apiUrl: string; adminKey: string } {
  const saved = readCredentials(home);
  const apiUrl = flags.apiUrl ?? process.env.PADDOCK_API_URL ?? saved.apiUrl ?? 'http://127.0.0.1:3000';
  const adminKey = flags.adminKey ?? process.env.PADDOCK_ADMIN_KEY ?? saved.adminKey;
  if (!adminKey) {
    throw new CliError('no admin credential', EXIT.unreachable, 'pass --admin-key, set PADDOCK_ADMIN_KEY, or run this where the first `paddock start` saved it');
  }
  return { apiUrl, adminKey };
}

/**
 * Gives a group of commands the --api-url and --admin-key options, and
 * returns how its actions run: with a ControlClient holding the admin
 * credential, their failures turned into CLI errors.
 */
export function adminCommands(group: Command, home: () => string): (fn: (control: ControlClient) => Promise<void>) => Promise<void> {
  // `paddock keys` has --api-url already, for its own team's keys.
  if (!group.options.some((o) => o.long === '--api-url')) group.option('--api-url <url>', 'control API (default: $PADDOCK_API_URL, or the local server)');
  group.option('--admin-key <key>', 'the admin credential, for --team (default: $PADDOCK_ADMIN_KEY, or the one the local server saved)');
  return async (fn) => {
    const c = adminConnection(home(), group.opts<ClientFlags & { adminKey?: string }>());
    try {
      await fn(new ControlClient({ apiUrl: c.apiUrl, apiKey: c.adminKey }));
    } catch (err) {
      const status = (err as { status?: number } | null)?.status;
      if (status === 401 || status === 403) {
        const message = (err as { serverMessage?: string; message?: string }).serverMessage ?? (err as Error).message;
        throw new CliError(message, EXIT.unreachable, 'the team commands need the admin credential, shown once by the first `paddock start` (PADDOCK_ADMIN_KEY or --admin-key)');
      }
      const mapped = controlError(err);
      throw mapped instanceof CliError ? mapped : cliError(mapped, c.apiUrl);
    }
  };
}

/** A team by its id or its name. */
export async function findTeam(control: ControlClient, ref: string): Promise<Team> {
  const found = (await control.listTeams()).find((t) => t.teamID === ref || t.name === ref);
  if (!found) throw new CliError(`no team has the id or name '${ref}'`, EXIT.notFound, 'see `paddock team list`');
  return found;
}

/** Turns SDK and network failures into messages with the exit code they mean. */
export function cliError(err: unknown, apiUrl: string): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof NotFoundError) return new CliError(err.message, EXIT.notFound);
  if (err instanceof AuthenticationError) return new CliError(err.message, EXIT.unreachable, 'check the API key (`paddock keys current`, or PADDOCK_API_KEY)');
  const cause = (err as { cause?: { code?: string } } | null)?.cause;
  const text = err instanceof Error ? err.message : String(err);
  if (cause?.code === 'ECONNREFUSED' || /ECONNREFUSED|fetch failed/.test(text)) {
    return new CliError(`no Paddock server is running at ${apiUrl}`, EXIT.unreachable, 'start one with `paddock start` (PADDOCK_API_URL or --api-url name another)');
  }
  if (err instanceof SandboxError) return new CliError(text, EXIT.failure);
  return new CliError(text, EXIT.failure);
}

/** control-client errors carry the server's status and message. */
export function controlError(err: unknown): unknown {
  const status = (err as { status?: number } | null)?.status;
  const message = (err as { serverMessage?: string; message?: string } | null)?.serverMessage ?? (err as Error)?.message;
  if (status === 404) return new CliError(message ?? 'not found', EXIT.notFound);
  if (status === 401) return new CliError(message ?? 'unauthorized', EXIT.unreachable, 'check the API key (`paddock keys current`, or PADDOCK_API_KEY)');
  if (typeof status === 'number' && message) return new CliError(message, EXIT.failure);
  return err;
}

/**
 * Gives a group of commands the --api-url and --api-key options, and returns
 * how its actions run: with a ControlClient, their failures turned into CLI
 * errors.
 */
export function controlCommands(group: Command, home: () => string): (fn: (control: ControlClient) => Promise<void>) => Promise<void> {
  group
    .option('--api-url <url>', 'control API (default: $PADDOCK_API_URL, or the local server)')
    .option('--api-key <key>', 'API key (default: $PADDOCK_API_KEY, or the one the local server saved)');
  return async (fn) => {
    const c = connection(home(), group.opts<ClientFlags>());
    try {
      await fn(new ControlClient({ apiUrl: c.apiUrl, apiKey: c.apiKey }));
    } catch (err) {
      const mapped = controlError(err);
      throw mapped instanceof CliError ? mapped : cliError(mapped, c.apiUrl);
    }
  };
}
