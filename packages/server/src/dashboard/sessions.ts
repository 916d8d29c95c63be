// The dashboard's sessions: a credential checked once at sign-in is
// exchanged for a random session id, which the browser keeps in an HttpOnly
// cookie. The server keeps only the id's SHA-256, so what it holds cannot be
// replayed as a cookie; each session has its own CSRF token, which a page
// reads from the sign-in answer and sends back in a header the browser never
// adds by itself.
//
// Sessions live in the server's memory: a restart signs everyone out, which
// costs a sign-in and keeps the store's schema out of it.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Caller } from '../auth.js';

/** Who a session acts as: what the credential given at sign-in resolved to (an API key of a team, or the admin credential). */
export interface Principal extends Caller {
  keyName: string;
}

export interface Session {
  principal: Principal;
  csrfToken: string;
  /** ms since the epoch. */
  expiresAt: number;
}

/** The cookie that carries the session id. */
export const SESSION_COOKIE = 'paddock_session';
/** The header that carries the session's CSRF token. */
export const CSRF_HEADER = 'x-csrf-token';

/** The most sessions kept at once; the oldest goes first beyond it, so signing in in a loop cannot fill the memory. */
const MAX_SESSIONS = 10_000;

const digest = (text: string) => createHash('sha256').update(text).digest();
const newSecret = () => randomBytes(32).toString('base64url');

export class DashboardSessions {
  /** By the hex SHA-256 of the session id; a Map keeps them oldest first. */
  readonly #byHash = new Map<string, Session>();

  constructor(
    /** How long a session lasts from sign-in, ms. */
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens a session for `principal`; the id returned is the cookie's value, kept nowhere here. */
  open(principal: Principal): { id: string; session: Session } {
    this.#sweep();
    while (this.#byHash.size >= MAX_SESSIONS) this.#byHash.delete(this.#byHash.keys().next().value!);
    const id = newSecret();
    const session: Session = { principal, csrfToken: newSecret(), expiresAt: this.now() + this.ttlMs };
    this.#byHash.set(digest(id).toString('hex'), session);
    return { id, session };
  }

  /** The live session of a cookie's value, or undefined (unknown or expired). */
  find(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const hash = digest(id).toString('hex');
    const session = this.#byHash.get(hash);
    if (session && session.expiresAt <= this.now()) {
      this.#byHash.delete(hash);
      return undefined;
    }
    return session;
  }

  /** Ends the session of a cookie's value, if there is one. */
  end(id: string | undefined): void {
    if (id) this.#byHash.delete(digest(id).toString('hex'));
  }

  /** Whether `sent` is the session's CSRF token, compared in constant time. */
  static csrfMatches(session: Session, sent: string | string[] | undefined): boolean {
    if (typeof sent !== 'string' || sent === '') return false;
    return timingSafeEqual(digest(sent), digest(session.csrfToken));
  }

  #sweep(): void {
    const now = this.now();
    for (const [hash, s] of this.#byHash) if (s.expiresAt <= now) this.#byHash.delete(hash);
  }
}
