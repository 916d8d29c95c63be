// What /init and the command line configure: the access token, sandbox-wide
// environment variables, the default user and working directory.
import { Code, ConnectError } from '@connectrpc/connect';
import { EnvdRouteError } from './errors.js';
import { UserDb, type User } from './users.js';

export interface EnvdConfig {
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  envVars?: Record<string, string>;
  passwdFile?: string;
  groupFile?: string;
}

export class EnvdState {
  accessToken: string | undefined;
  defaultUser: string | undefined;
  defaultWorkdir: string | undefined;
  readonly envVars: Map<string, string>;
  readonly users: UserDb;

  constructor(config: EnvdConfig = {}) {
    this.accessToken = config.accessToken || undefined;
    this.defaultUser = config.defaultUser || undefined;
    this.defaultWorkdir = config.defaultWorkdir || undefined;
    this.envVars = new Map(Object.entries(config.envVars ?? {}));
    this.users = new UserDb(config.passwdFile, config.groupFile);
  }

  /** The user a request acts as: the one it names, else the default. */
  private pick(name: string | undefined): { name: string; user: User | undefined } {
    if (name) return { name, user: this.users.lookup(name) };
    const fallback = this.defaultUser ?? 'user';
    const user = this.users.lookup(fallback) ?? (this.defaultUser ? undefined : this.users.lookup('root'));
    return { name: fallback, user };
  }

  /** For RPCs: an unknown user is `invalid_argument`. */
  rpcUser(name: string | undefined): User {
    const { name: n, user } = this.pick(name);
    if (!user) throw new ConnectError(`user '${n}' does not exist`, Code.InvalidArgument);
    return user;
  }

  /** For HTTP routes: an unknown user is 401, as E2B's envd answers. */
  httpUser(name: string | undefined): User {
    const { name: n, user } = this.pick(name);
    if (!user) throw new EnvdRouteError(401, `user '${n}' does not exist`);
    return user;
  }
}
