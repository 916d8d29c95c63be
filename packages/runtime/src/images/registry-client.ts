// The pull side of the OCI distribution API over undici: manifests and blobs
// of one repository, with the authentication registries ask for in their
// 401 answers (Basic, or a Bearer token from the realm they name, as Docker
// Hub and GHCR do). Blobs are streamed to the caller, who checks them.
import { Agent, interceptors, request, type Dispatcher } from 'undici';
import { RuntimeError } from '../runtime.js';
import { MANIFEST_ACCEPT } from './manifest.js';
import { isLoopback, type ImageRef } from './reference.js';

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface RegistryOptions {
  /** Registries (`host[:port]`) reached over plain HTTP; loopback ones always are. */
  insecureRegistries?: string[];
  /** Credentials by registry as references name it (`docker.io`, `ghcr.io`, `127.0.0.1:5000`). */
  auth?: Record<string, RegistryCredentials>;
}

/** The most a manifest or an image configuration may be: they are read whole. */
export const MAX_DOCUMENT = 8 * 1024 * 1024;

interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** The challenges of a WWW-Authenticate header: `Bearer realm="...",service="..."`. */
export function parseChallenge(header: string): Challenge | undefined {
  const m = /^\s*(\w+)\s*(.*)$/s.exec(header);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  for (const p of m[2]!.matchAll(/(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3]!;
  }
  return { scheme: m[1]!.toLowerCase(), params };
}

export interface Fetched {
  body: Dispatcher.ResponseData['body'];
  contentType: string | undefined;
  digestHeader: string | undefined;
}

export class RegistryClient {
  private readonly dispatcher: Dispatcher;
  /** Authorization header values by `host/repository`, and when each stops being good. */
  private readonly authorizations = new Map<string, { value: string; until: number }>();

  constructor(private readonly opts: RegistryOptions = {}) {
    this.dispatcher = new Agent({ connections: 8 }).compose(interceptors.redirect({ maxRedirections: 5 }));
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private base(ref: ImageRef): string {
    const plain = isLoopback(ref.host) || (this.opts.insecureRegistries ?? []).includes(ref.registry) || (this.opts.insecureRegistries ?? []).includes(ref.host);
    return `${plain ? 'http' : 'https'}://${ref.host}`;
  }

  private credentials(ref: ImageRef): RegistryCredentials | undefined {
    return this.opts.auth?.[ref.registry] ?? this.opts.auth?.[ref.host];
  }

  /** GET of a manifest (`reference` a tag or a digest) or a blob (`digest`), authenticating as the registry asks. */
  async get(ref: ImageRef, kind: 'manifests' | 'blobs', reference: string, signal?: AbortSignal): Promise<Fetched> {
    const url = `${this.base(ref)}/v2/${ref.repository}/${kind}/${reference}`;
    const key = `${ref.host}/${ref.repository}`;
    const what = kind === 'manifests' ? `manifest '${reference}'` : `blob ${reference}`;
    for (let attempt = 0; ; attempt++) {
      const cached = this.authorizations.get(key);
      const headers: Record<string, string> = { 'user-agent': 'paddock' };
      if (kind === 'manifests') headers.accept = MANIFEST_ACCEPT;
      if (cached && cached.until > Date.now()) headers.authorization = cached.value;
      const res = await this.send(url, headers, ref, signal);
      if (res.statusCode === 401 && attempt === 0) {
        const challenge = res.headers['www-authenticate'];
        await res.body.dump();
        await this.authenticate(ref, key, typeof challenge === 'string' ? challenge : Array.isArray(challenge) ? challenge[0] : undefined, signal);
        continue;
      }
      if (res.statusCode >= 200 && res.statusCode < 300) {
        const header = (name: string) => {
          const v = res.headers[name];
          return Array.isArray(v) ? v[0] : v;
        };
        return { body: res.body, contentType: header('content-type'), digestHeader: header('docker-content-digest') };
      }
      const detail = await errorDetail(res.body);
      throw statusError(ref, res.statusCode, `${what} of repository '${ref.repository}'`, detail, !!this.credentials(ref));
    }
  }

  private async send(url: string, headers: Record<string, string>, ref: ImageRef, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    try {
      return await request(url, { dispatcher: this.dispatcher, headers, signal, headersTimeout: 60_000, bodyTimeout: 60_000 });
    } catch (err) {
      if (signal?.aborted) throw new RuntimeError('unavailable', `image '${ref.canonical}': the pull was cancelled`, { cause: err });
      const e = err as Error & { code?: string; cause?: { code?: string } };
      throw new RuntimeError('unavailable', `image '${ref.canonical}': registry ${ref.registry} could not be reached (${e.cause?.code ?? e.code ?? e.message})`, { cause: err });
    }
  }

  private async authenticate(ref: ImageRef, key: string, header: string | undefined, signal?: AbortSignal): Promise<void> {
    const creds = this.credentials(ref);
    const challenge = header ? parseChallenge(header) : undefined;
    const basic = creds && `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
    if (challenge?.scheme === 'basic') {
      if (!basic) throw new RuntimeError('invalid', `image '${ref.canonical}': registry ${ref.registry} requires a username and password, and none is configured for it`);
      this.authorizations.set(key, { value: basic, until: Infinity });
      return;
    }
    if (challenge?.scheme !== 'bearer' || !challenge.params.realm) {
      throw new RuntimeError('invalid', `image '${ref.canonical}': registry ${ref.registry} answered 401 without a usable challenge ('${header ?? ''}')`);
    }
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm);
    } catch {
      throw new RuntimeError('invalid', `image '${ref.canonical}': registry ${ref.registry} names token realm '${challenge.params.realm}', which is not a URL`);
    }
    if (challenge.params.service) realm.searchParams.set('service', challenge.params.service);
    realm.searchParams.set('scope', challenge.params.scope ?? `repository:${ref.repository}:pull`);
    // Credentials go to a token service in the clear only on this machine.
    const sendBasic = basic && (realm.protocol === 'https:' || isLoopback(realm.host));
    const headers: Record<string, string> = { 'user-agent': 'paddock', ...(sendBasic ? { authorization: basic } : {}) };
    const res = await this.send(realm.href, headers, ref, signal);
    if (res.statusCode !== 200) {
      const detail = await errorDetail(res.body);
      throw new RuntimeError('invalid', `image '${ref.canonical}': the token service of registry ${ref.registry} refused ${creds ? `user '${creds.username}'` : 'anonymous access'} (${res.statusCode}${detail ? `: ${detail}` : ''})`);
    }
    const body = (await res.body.json().catch(() => ({}))) as { token?: unknown; access_token?: unknown; expires_in?: unknown };
    const token = typeof body.token === 'string' ? body.token : typeof body.access_token === 'string' ? body.access_token : undefined;
    if (!token) throw new RuntimeError('invalid', `image '${ref.canonical}': the token service of registry ${ref.registry} answered without a token`);
    const seconds = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 60;
    // Renewed a little early, so a token does not run out between asking and being used.
    this.authorizations.set(key, { value: `Bearer ${token}`, until: Date.now() + Math.max(seconds - 10, 5) * 1000 });
  }
}

/** The registry's own words about an error (its JSON `errors`), kept short. */
async function errorDetail(body: Dispatcher.ResponseData['body']): Promise<string> {
  const text = await body.text().catch(() => '');
  try {
    const errors = (JSON.parse(text) as { errors?: { code?: string; message?: string }[] }).errors ?? [];
    const said = errors.map((e) => [e.code, e.message].filter(Boolean).join(': ')).join('; ');
    if (said) return said.slice(0, 300);
  } catch {
    // not JSON: the text itself below
  }
  return text.trim().slice(0, 200);
}

function statusError(ref: ImageRef, status: number, what: string, detail: string, hadCredentials: boolean): RuntimeError {
  const said = detail ? ` (${detail})` : '';
  const prefix = `image '${ref.canonical}'`;
  if (status === 404) return new RuntimeError('not_found', `${prefix} not found: registry ${ref.registry} has no ${what}${said}`);
  if (status === 401 || status === 403) {
    return new RuntimeError('invalid', `${prefix}: registry ${ref.registry} refused access to ${what} (${status})${hadCredentials ? ' with the credentials configured for it' : '; no credentials are configured for it'}${said}`);
  }
  if (status === 429 || status >= 500) return new RuntimeError('unavailable', `${prefix}: registry ${ref.registry} answered ${status} for ${what}${said}`);
  return new RuntimeError('invalid', `${prefix}: registry ${ref.registry} answered ${status} for ${what}${said}`);
}
