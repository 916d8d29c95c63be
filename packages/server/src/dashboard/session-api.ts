// The dashboard's part of the control API: signing in and out, and what a
// request made with the session cookie instead of an API key is worth.
import { fastifyCookie } from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
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
  keyName: s.principal.keyName,
  csrfToken: s.csrfToken,
  expiresAt: new Date(s.expiresAt).toISOString(),
});

/** Methods that read; every other one changes state and needs the CSRF token. */
const READS = new Set(['GET', 'HEAD']);

export class DashboardApi {
  readonly #sessions: DashboardSessions;

  constructor(
    private readonly keys: ApiKeyRepository,
    ttlMs: number,
    /** Over TLS the cookie is Secure. */
    private readonly secure: boolean,
  ) {
    this.#sessions = new DashboardSessions(ttlMs);
  }

  /** `POST /dashboard/session`: the key checked, a session opened, its cookie set. */
  async signIn(key: string) {
    const keyId = await this.keys.verify(key);
    if (!keyId) throw new ApiError(401, 'invalid API key');
    const record = (await this.keys.list()).find((k) => k.id === keyId);
    if (!record) throw new ApiError(401, 'invalid API key');
    await this.keys.touch(keyId);
    const { id, session } = this.#sessions.open({ keyId, keyName: record.name });
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

  /**
   * The session of a request that came with the session cookie (and no API
   * key): undefined when it has no cookie; an error when the session is gone,
   * its key was deleted, or the request changes state without the session's
   * CSRF token.
   */
  async authenticate(req: FastifyRequest): Promise<SessionRef | ApiError | undefined> {
    const id = req.cookies?.[SESSION_COOKIE];
    if (!id) return undefined;
    const session = this.#sessions.find(id);
    if (!session) return new ApiError(401, 'the dashboard session has ended; sign in again');
    if (!(await this.keys.list()).some((k) => k.id === session.principal.keyId)) {
      this.#sessions.end(id);
      return new ApiError(401, 'the API key of this dashboard session was deleted; sign in again');
    }
    if (!READS.has(req.method) && !DashboardSessions.csrfMatches(session, req.headers[CSRF_HEADER])) {
      return new ApiError(403, `a ${req.method} request made with the dashboard session cookie must send the session's CSRF token in X-CSRF-Token`);
    }
    await this.keys.touch(session.principal.keyId);
    return { id, session };
  }

  #cookie(value: string, maxAgeS: number): string {
    return fastifyCookie.serialize(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'strict', path: '/', maxAge: maxAgeS, secure: this.secure });
  }
}
