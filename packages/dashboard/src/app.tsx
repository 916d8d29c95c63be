import { useEffect, useMemo, useState } from 'react';
import { SignedContext } from './context.js';
import { errorText } from './format.js';
import { ApiKeysPage } from './pages/api-keys-page.js';
import { SandboxPage } from './pages/sandbox-page.js';
import { SandboxesPage } from './pages/sandboxes-page.js';
import { SignInPage } from './pages/sign-in-page.js';
import { TemplatePage } from './pages/template-page.js';
import { TemplatesPage } from './pages/templates-page.js';
import { href, useRoute, type Route } from './router.js';
import { controlClient, currentSession, SESSION_ENDED, signOut, type SessionInfo } from './session.js';

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'sandboxes':
      return <SandboxesPage />;
    case 'sandbox':
      return <SandboxPage key={route.id} id={route.id} tab={route.tab} />;
    case 'templates':
      return <TemplatesPage />;
    case 'template':
      return <TemplatePage key={route.id} id={route.id} buildId={route.buildId} />;
    case 'api-keys':
      return <ApiKeysPage />;
  }
}

export function App() {
  const route = useRoute();
  // undefined: not known yet; null: signed out.
  const [session, setSession] = useState<SessionInfo | null>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    currentSession().then(
      (s) => setSession(s ?? null),
      () => setSession(null),
    );
  }, []);
  useEffect(() => {
    const ended = () => setSession(null);
    window.addEventListener(SESSION_ENDED, ended);
    return () => window.removeEventListener(SESSION_ENDED, ended);
  }, []);
  const control = useMemo(() => (session ? controlClient(session.csrfToken) : undefined), [session]);

  if (session === undefined) return <p className="muted pad">Loading…</p>;
  if (session === null || !control) return <SignInPage onSignedIn={setSession} />;

  const out = async () => {
    try {
      await signOut(session);
      setSession(null);
    } catch (err) {
      setError(errorText(err));
    }
  };
  const section = route.page === 'sandbox' ? 'sandboxes' : route.page === 'template' ? 'templates' : route.page;
  return (
    <SignedContext.Provider value={{ session, control }}>
      <header className="top">
        <strong className="brand">Paddock</strong>
        <nav>
          <a href={href('sandboxes')} className={section === 'sandboxes' ? 'current' : ''}>
            Sandboxes
          </a>
          <a href={href('templates')} className={section === 'templates' ? 'current' : ''}>
            Templates
          </a>
          <a href={href('api-keys')} className={section === 'api-keys' ? 'current' : ''}>
            API keys
          </a>
        </nav>
        <span className="muted who">
          key <code>{session.keyName}</code>
        </span>
        <button onClick={out}>Sign out</button>
      </header>
      {error && <p className="error pad">{error}</p>}
      <main>
        <Page route={route} />
      </main>
    </SignedContext.Provider>
  );
}
