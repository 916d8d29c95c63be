// Who makes a request. One function turns a request's credential into its
// caller — an API key of a team, or the admin credential — for the control
// API's routes and the sandbox proxy alike. Each kind of credential is read
// by a resolver; one that finds none of its kind passes the request on to
// the next, so another kind (a session cookie) is one more resolver.
import type { IncomingHttpHeaders } from 'node:http';
import { ADMIN_KEY_PREFIX, type AdminKeyRepository, type ApiKeyRepository, type TeamScope } from './store/repositories.js';

/** Who a request comes from. */
export interface Caller {
  /** The id of its credential (never the credential): an API key's, or the admin credential's. */
  keyId: string;
  /** The team of its API key; null for the admin credential, which belongs to none. */
  teamId: string | null;
  /** The admin credential: manages teams and keys, and sees every team's objects. */
  admin: boolean;
}

/**
 * What a resolver made of a request: no credential of its kind, one it
 * refuses (and why: 401, or 403 for a good credential used wrongly, such as
 * a session cookie without its CSRF token), or its caller.
 */
export type Identified = { kind: 'none' } | { kind: 'refused'; message: string; status?: 401 | 403 } | { kind: 'caller'; caller: Caller };

/** How a request is read: whether its route takes `Authorization: Bearer`, and its method (a cookie's CSRF check needs it). */
export interface IdentifyOptions {
  bearer: boolean;
  method?: string;
}

/** Reads one kind of credential off a request's headers. */
export type CredentialResolver = (headers: IncomingHttpHeaders, options: IdentifyOptions) => Promise<Identified>;

/** Whose objects a caller sees: its team's, or every team's for the admin credential. */
export function scopeOf(caller: Caller): TeamScope {
  if (caller.admin) return 'all';
  if (caller.teamId === null) throw new Error(`caller '${caller.keyId}' has no team and is not the admin`);
  return { teamId: caller.teamId };
}

/** The server's own work (expiry, the proxy resuming a sandbox): every team's. */
export const SERVER: Caller = { keyId: 'server', teamId: null, admin: true };

const single = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
/** The credentials of `Authorization: Bearer {credentials}`. */
const bearerOf = (header: string | undefined) => /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];

/**
 * `X-API-Key` (or, where the route takes it, `Authorization: Bearer`): an
 * API key of a team, or the admin credential, told apart by its prefix.
 */
export function keyResolver(keys: ApiKeyRepository, admin: AdminKeyRepository): CredentialResolver {
  return async (headers, { bearer }) => {
    const key = single(headers['x-api-key']) ?? (bearer ? bearerOf(single(headers.authorization)) : undefined);
    if (!key) return { kind: 'none' };
    if (key.startsWith(ADMIN_KEY_PREFIX)) {
      const id = await admin.verify(key);
      return id ? { kind: 'caller', caller: { keyId: id, teamId: null, admin: true } } : { kind: 'refused', message: 'invalid admin credential' };
    }
    const found = await keys.verify(key);
    if (!found) return { kind: 'refused', message: 'invalid API key' };
    await keys.touch(found.id);
    return { kind: 'caller', caller: { keyId: found.id, teamId: found.teamId, admin: false } };
  };
}

/** The resolvers of a server, tried in order; the first that finds a credential decides. */
export class Authenticator {
  private readonly resolvers: CredentialResolver[];

  constructor(...resolvers: CredentialResolver[]) {
    this.resolvers = resolvers;
  }

  /** Adds a kind of credential, tried after those already known. */
  add(resolver: CredentialResolver): void {
    this.resolvers.push(resolver);
  }

  /** The caller of a request with these headers, a refusal of its credential, or 'none' when it carries none. */
  async identify(headers: IncomingHttpHeaders, options: IdentifyOptions = { bearer: false }): Promise<Identified> {
    for (const resolve of this.resolvers) {
      const found = await resolve(headers, options);
      if (found.kind !== 'none') return found;
    }
    return { kind: 'none' };
  }
}
