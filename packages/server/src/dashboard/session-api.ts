// The dashboard's part of the control API: signing in and out, and what a
// request made with the session cookie instead of an API key is worth.
import { fastifyCookie } from '@fastify/cookie';
import type { IncomingHttpHeaders } from 'node:http';
import type { Authenticator, CredentialResolver } from '../auth.js';
import { ApiError } from '../errors.js';
import type { ApiKeyRepository } from '../store/repositories.js';
import { CSRF_HEADER, DashboardSessions, SESSION_COOKIE, type Session } from './sessions.js';

/** A request's session and the cookie value that named it (to end it by). */
export interface SessionRef {
  id: string;
  session: Session;
}

/** What the `DashboardSession` schema answers. */
const view = (s: Session) => ({
  keyID: s.principal.keyId,
  ...(s.principal.teamId !== null ? { teamID: s.principal.teamId } : {}),
  admin: s.principal.admin,
  keyName: s.principal.keyName,
  csrfToken: s.csrfToken,
  expiresAt: new Date(s.expiresAt).toISOString(),
});

/** Methods that read; every other one changes state and needs the CSRF token. */
const READS = new Set(['GET', 'HEAD']);

export class DashboardApi {
  readonly #sessions: DashboardSessions;

  constructor(
    /** Checks the credential given at sign-in, as a request's would be. */
    private readonly auth: Pick<Authenticator, 'identify'>,
    private readonly keys: ApiKeyRepository,
    ttlMs: number,
    /** Over TLS the cookie is Secure. */
    private readonly secure: boolean,
  ) {
    this.#sessions = new DashboardSessions(ttlMs);
  }

  /** `POST /dashboard/session`: the key checked, a session opened, its cookie set. */
  async signIn(key: string) {
    // The credential alone, as X-API-Key: an API key of a team, or the admin credential.
    const who = await this.auth.identify({ 'x-api-key': key }, { bearer: false });
    if (who.kind !== 'caller') throw new ApiError(401, who.kind === 'refused' ? who.message : 'invalid API key');
    const { caller } = who;
    const keyName = caller.admin ? 'admin' : (await this.keys.list({ teamId: caller.teamId! })).find((k) => k.id === caller.keyId)?.name;
    if (keyName === undefined) throw new ApiError(401, 'invalid API key');
    const { id, session } = this.#sessions.open({ ...caller, keyName });
    return { status: 201 as const, body: view(session), headers: { 'set-cookie': this.#cookie(id, Math.floor(this.#sessions.ttlMs / 1000)) } };
  }

  /** `GET /dashboard/session`. */
  current(ref: SessionRef | undefined) {
    if (!ref) throw new ApiError(401, 'no dashboard session: sign in with POST /dashboard/session');
    return { status: 200 as const, body: view(ref.session) };
  }

  /** `DELETE /dashboard/session`: the session ended and its cookie cleared. */
  signOut(ref: SessionRef | undefined) {
    if (!ref) throw new ApiError(401, 'no dashboard session: sign in with POST /dashboard/session');
    this.#sessions.end(ref.id);
    return { status: 204 as const, headers: { 'set-cookie': this.#cookie('', 0) } };
  }

  /** The session a request's cookie names, if it is live (for the session routes). */
  sessionOf(headers: IncomingHttpHeaders): SessionRef | undefined {
    const id = cookieOf(headers);
    const session = id ? this.#sessions.find(id) : undefined;
    return id && session ? { id, session } : undefined;
  }

  /**
   * The session cookie as a credential, for the server's authenticator
   * (after the API key: a request with a key is the key's): nothing without
   * the cookie; refused when the session is gone, its key was deleted, or
   * the request changes state without the session's CSRF token (403); else
   * the caller the session was opened as.
   */
  resolver(): CredentialResolver {
    return async (headers, { method }) => {
      const id = cookieOf(headers);
      if (!id) return { kind: 'none' };
      const session = this.#sessions.find(id);
      if (!session) return { kind: 'refused', message: 'the dashboard session has ended; sign in again' };
      const { principal } = session;
      if (!principal.admin && !(await this.keys.list({ teamId: principal.teamId! })).some((k) => k.id === principal.keyId)) {
        this.#sessions.end(id);
        return { kind: 'refused', message: 'the API key of this dashboard session was deleted; sign in again' };
      }
      const verb = (method ?? 'GET').toUpperCase();
      if (!READS.has(verb) && !DashboardSessions.csrfMatches(session, headers[CSRF_HEADER])) {
        return { kind: 'refused', status: 403, message: `a ${verb} request made with the dashboard session cookie must send the session's CSRF token in X-CSRF-Token` };
      }
      if (!principal.admin) await this.keys.touch(principal.keyId);
      return { kind: 'caller', caller: { keyId: principal.keyId, teamId: principal.teamId, admin: principal.admin } };
    };
  }

  #cookie(value: string, maxAgeS: number): string {
    return fastifyCookie.serialize(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'strict', path: '/', maxAge: maxAgeS, secure: this.secure });
  }
}

/** The session cookie's value in a request's Cookie header. */
function cookieOf(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.cookie;
  return header ? fastifyCookie.parse(header)[SESSION_COOKIE] : undefined;
}
