// Signing in and out: the generated control client's session routes. The
// credential goes in a POST body; the server answers with an HttpOnly
// cookie (which this page cannot read) and the session's CSRF token, which
// every state-changing call sends back in X-CSRF-Token.
import { ControlClient } from '@paddock/control-client';
import type { components } from '@paddock/models/control';

export type SessionInfo = components['schemas']['DashboardSession'];

/** Sent on the window when the API answers 401 to a signed-in page: the session has ended. */
export const SESSION_ENDED = 'paddock:session-ended';

/** The control API on the page's own origin; with the session's CSRF token once signed in. */
export function controlClient(csrfToken?: string): ControlClient {
  return new ControlClient({
    apiUrl: window.location.origin,
    headers: csrfToken ? { 'X-CSRF-Token': csrfToken } : {},
    // A page shows a failure at once; the person can try again.
    retries: { maxRetries: 0 },
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (csrfToken && res.status === 401) window.dispatchEvent(new Event(SESSION_ENDED));
      return res;
    },
  });
}

/** What the API said was wrong, from its `Error` body. */
function failure(error: unknown, status: number): Error {
  const message = typeof error === 'object' && error && 'message' in error ? String(error.message) : `HTTP ${status}`;
  return new Error(message);
}

export async function signIn(key: string): Promise<SessionInfo> {
  const { data, error, response } = await controlClient().api.POST('/dashboard/session', { body: { key } });
  if (!data) throw failure(error, response.status);
  return data;
}

/** The session the cookie names, if there is one. */
export async function currentSession(): Promise<SessionInfo | undefined> {
  const { data } = await controlClient().api.GET('/dashboard/session');
  return data;
}

export async function signOut(session: SessionInfo): Promise<void> {
  const { error, response } = await controlClient(session.csrfToken).api.DELETE('/dashboard/session');
  // 401: it had ended already.
  if (!response.ok && response.status !== 401) throw failure(error, response.status);
}
