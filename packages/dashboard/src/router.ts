// Pages are chosen by the URL's fragment (`#/sandboxes/{id}/files`), so the
// server has one page to serve. Fragments hold ids only, never a secret.
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'sandboxes' }
  | { page: 'sandbox'; id: string; tab: SandboxTab }
  | { page: 'templates' }
  | { page: 'template'; id: string; buildId?: string }
  | { page: 'api-keys' };

export const SANDBOX_TABS = ['metrics', 'logs', 'files', 'terminal'] as const;
export type SandboxTab = (typeof SANDBOX_TABS)[number];

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'sandboxes' && parts[1]) {
    const tab = SANDBOX_TABS.find((t) => t === parts[2]) ?? 'metrics';
    return { page: 'sandbox', id: parts[1], tab };
  }
  if (parts[0] === 'templates' && parts[1]) return parts[2] ? { page: 'template', id: parts[1], buildId: parts[2] } : { page: 'template', id: parts[1] };
  if (parts[0] === 'templates') return { page: 'templates' };
  if (parts[0] === 'api-keys') return { page: 'api-keys' };
  return { page: 'sandboxes' };
}

export const href = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join('/')}`;

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
