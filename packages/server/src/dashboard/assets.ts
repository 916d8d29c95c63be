// The dashboard's page and its bundles, built by the @paddock/dashboard
// package, served at /dashboard/ on the control API's port: the page then
// calls the API on its own origin, with the session cookie.
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ApiError } from '../errors.js';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/dashboard/';

/** The built dashboard: the installed package's, else the workspace's (running from source); undefined when not built. */
export function dashboardAssets(): string | undefined {
  const candidates: string[] = [];
  try {
    candidates.push(join(dirname(createRequire(import.meta.url).resolve('@paddock/dashboard/package.json')), 'dist'));
  } catch {
    // Not installed as a package: running in the repository.
  }
  candidates.push(join(import.meta.dirname, '../../../dashboard/dist'));
  return candidates.find((dir) => existsSync(join(dir, 'index.html')));
}

/**
 * The page may run its own scripts only, talk to this origin and to envd
 * through the sandbox proxy (`{port}-{id}.{domain}`), and is never framed.
 */
function contentSecurityPolicy(domain: string): string {
  const host = domain.replace(/:\d+$/, '');
  const port = domain.slice(host.length);
  const sandboxes = `http://*.${host}${port} https://*.${host}${port}`;
  return [
    "default-src 'self'",
    "script-src 'self'",
    // xterm.js sizes its rows with a style element of its own.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    `connect-src 'self' ${sandboxes}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
}

/** Serves the built dashboard at DASHBOARD_PATH, or answers that it is not built. */
export function registerDashboardAssets(app: FastifyInstance, root: string | undefined, domain: string): void {
  if (!root) {
    app.get(`${DASHBOARD_PATH}*`, async () => {
      throw new ApiError(404, "the dashboard is not built: run 'npm run build' (its files come from the @paddock/dashboard package)");
    });
    return;
  }
  const csp = contentSecurityPolicy(domain);
  void app.register(fastifyStatic, {
    root,
    prefix: DASHBOARD_PATH,
    // The page is served by the route below: the plugin's own index route misses under ignoreTrailingSlash.
    index: false,
    dotfiles: 'deny',
    cacheControl: false,
    setHeaders(res, path) {
      res.setHeader('content-security-policy', csp);
      res.setHeader('x-frame-options', 'DENY');
      res.setHeader('x-content-type-options', 'nosniff');
      res.setHeader('referrer-policy', 'no-referrer');
      // Bundles are named for their content; the page must always be asked for again.
      res.setHeader('cache-control', path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  app.get(DASHBOARD_PATH, (_req, reply) => reply.sendFile('index.html'));
}
