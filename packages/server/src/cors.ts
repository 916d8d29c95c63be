// Cross-origin requests from web pages: the official SDK runs in browsers,
// and E2B's API and envd allow any origin. The control API answers them
// with @fastify/cors; the sandbox proxy answers preflights itself (a
// preflight names the E2b-Sandbox-* headers without their values, so it
// cannot be routed) and adds the fields to what envd answers. A sandbox's
// own ports are its services' business: their preflights are passed on and
// their answers left as they are.
import { cors as connectCors } from '@connectrpc/connect';
import type { IncomingHttpHeaders } from 'node:http';

/** Fields of envd's answers that the SDKs read in a browser. */
export const EXPOSED_HEADERS = [...connectCors.exposedHeaders, 'Content-Encoding', 'Content-Disposition', 'X-E2b-Legacy-Sdk'];
const ALLOWED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** How long a browser may keep a preflight's answer, s. */
const MAX_AGE_S = 7200;

export class CorsPolicy {
  private readonly any: boolean;
  private readonly origins: Set<string>;

  constructor(origins: string[]) {
    this.any = origins.includes('*');
    this.origins = new Set(origins.map((o) => o.replace(/\/$/, '')));
  }

  /** What `access-control-allow-origin` says to this request's Origin; undefined when it has none or it is not allowed. */
  allowOrigin(headers: IncomingHttpHeaders): string | undefined {
    const origin = headers.origin;
    if (typeof origin !== 'string' || !origin) return undefined;
    if (this.any) return '*';
    return this.origins.has(origin) ? origin : undefined;
  }

  /** Whether the request is a CORS preflight. */
  static isPreflight(method: string | undefined, headers: IncomingHttpHeaders): boolean {
    return method === 'OPTIONS' && typeof headers.origin === 'string' && typeof headers['access-control-request-method'] === 'string';
  }

  /** The answer's fields for a preflight the proxy answers itself; undefined when its origin is not allowed. */
  preflight(headers: IncomingHttpHeaders): Record<string, string> | undefined {
    const origin = this.allowOrigin(headers);
    if (!origin) return undefined;
    const asked = headers['access-control-request-headers'];
    return {
      'access-control-allow-origin': origin,
      'access-control-allow-methods': ALLOWED_METHODS.join(', '),
      ...(typeof asked === 'string' && asked ? { 'access-control-allow-headers': asked } : {}),
      'access-control-max-age': String(MAX_AGE_S),
      ...(origin === '*' ? {} : { vary: 'Origin' }),
    };
  }

  /** Fields for an answer to a cross-origin request (envd's, or the proxy's own); undefined for one without an allowed Origin. */
  answer(headers: IncomingHttpHeaders): Record<string, string> | undefined {
    const origin = this.allowOrigin(headers);
    if (!origin) return undefined;
    return { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSED_HEADERS.join(', '), ...(origin === '*' ? {} : { vary: 'Origin' }) };
  }
}
