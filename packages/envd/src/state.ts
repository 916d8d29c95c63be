// What /init and the command line configure: the access token, sandbox-wide
// environment variables, the default user and working directory, and the
// image's environment.
import { Code, ConnectError } from '@connectrpc/connect';
import { EnvdRouteError } from './errors.js';
import { UserDb, type User } from './users.js';
import { StreamEnds } from './stream-ends.js';

export interface EnvdConfig {
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  envVars?: Record<string, string>;
  passwdFile?: string;
  groupFile?: string;
  /** The environment every process envd starts begins with: the image's (`--env`). */
  imageEnv?: Record<string, string>;
}

export class EnvdState {
  accessToken: string | undefined;
  defaultUser: string | undefined;
  defaultWorkdir: string | undefined;
  readonly envVars: Map<string, string>;
  readonly imageEnv: Readonly<Record<string, string>>;
  readonly users: UserDb;
  /** Every stream under way, to be ended together (POST /streams/end). */
  readonly streams = new StreamEnds();

  constructor(config: EnvdConfig = {}) {
    this.accessToken = config.accessToken || undefined;
    this.defaultUser = config.defaultUser || undefined;
    this.defaultWorkdir = config.defaultWorkdir || undefined;
    this.envVars = new Map(Object.entries(config.envVars ?? {}));
    this.imageEnv = { ...config.imageEnv };
    this.users = new UserDb(config.passwdFile, config.groupFile);
  }

  /**
   * The user a request acts as: the one it names, which must exist, else the
   * default. An image need not have the default user (`user`, or whom
   * --default-user or /init named): a scratch or distroless image has no
   * passwd file at all. Root acts then, as a container engine runs such an
   * image's processes.
   */
  private pick(name: string | undefined): { name: string; user: User | undefined } {
    if (name) return { name, user: this.users.lookup(name) };
    const fallback = this.defaultUser ?? 'user';
    return { name: fallback, user: this.users.lookup(fallback) ?? this.users.lookup('root') };
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
