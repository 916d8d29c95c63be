// Which header fields cross the relay. Hop-by-hop fields describe one
// connection (RFC 9110 §7.6.1) and stay behind, with every field that a
// message's Connection header names; the next hop frames and routes the
// message by fields of its own (undici on the way in, Node's server on the
// way out).
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
  // Answered by the relay itself: it sends 100 Continue once the request is routed.
  'expect',
]);
/** Fields that Connection may not take away: the message is framed and routed by them. */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host']);

/** The comma-separated tokens of a field, lowercased. */
export function tokens(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value])
    .flatMap((v) => v.split(','))
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
}

/** Whether a field stays behind, given the message's Connection field. */
export function dropped(connection: string | string[] | undefined): (lowerName: string) => boolean {
  const named = tokens(connection).filter((t) => !FRAMING.has(t));
  return (name) => HOP_BY_HOP.has(name) || named.includes(name);
}

/**
 * The request's fields for the upstream, as sent (order, case and repeats
 * kept), as undici takes them; `host` replaces the Host field's value.
 */
export function requestFields(req: IncomingMessage, host?: string, requestId?: string): string[] {
  const drop = dropped(req.headers.connection);
  const raw = req.rawHeaders;
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (drop(lower) || (requestId !== undefined && lower === REQUEST_ID)) continue;
    const value = withoutCredentials(lower, raw[i + 1]!);
    if (value === undefined) continue;
    out.push(raw[i]!, host !== undefined && lower === 'host' ? host : value);
  }
  if (requestId !== undefined) out.push(REQUEST_ID, requestId);
  return out;
}

/** What Paddock's own credentials look like: an API key of a team, or the admin credential. */
const PADDOCK_KEY = /^(e2b_|paddock_admin_)/;
/** The dashboard's session cookie (dashboard/sessions.ts). */
const SESSION_COOKIE = 'paddock_session';

/**
 * A request field as it may reach a sandbox, without Paddock's own
 * credentials: the proxy reads them to know the caller, and the code in
 * the sandbox must never see them (it could act as the caller's team).
 * The value to send on, or undefined to leave the field behind: `X-API-Key`
 * (the control API's own field) always, `Authorization` when it carries a
 * Paddock key as its bearer token, and the dashboard's cookie out of
 * `Cookie`. A service's own `Authorization` and cookies pass.
 */
export function withoutCredentials(lower: string, value: string): string | undefined {
  if (lower === 'x-api-key') return undefined;
  if (lower === 'authorization') {
    const bearer = /^bearer\s+(\S+)/i.exec(value.trim())?.[1];
    return bearer && PADDOCK_KEY.test(bearer) ? undefined : value;
  }
  if (lower === 'cookie') {
    const kept = value
      .split(';')
      .filter((pair) => pair.split('=', 1)[0]!.trim() !== SESSION_COOKIE)
      .join(';')
      .trim();
    return kept === '' ? undefined : kept;
  }
  return value;
}

/** The field that carries a request's id upstream. */
export const REQUEST_ID = 'x-request-id';

/** The response's fields for the client; Node's server adds its own framing and connection fields. */
export function responseFields(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const drop = dropped(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !drop(name)) out[name] = value;
  return out;
}

/** What is wrong with a request's Host fields, if anything: both paths route by the one Host there must be. */
export function hostFault(lowerNames: readonly string[], minor: number): string | undefined {
  const hosts = lowerNames.filter((n) => n === 'host').length;
  if (hosts > 1) return 'the request has more than one Host header';
  if (hosts === 0 && minor === 1) return 'an HTTP/1.1 request must have a Host header';
  return undefined;
}
