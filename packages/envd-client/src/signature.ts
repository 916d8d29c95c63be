import { EnvdArgumentError } from './errors.js';
import { encodeFileSignature, fileSignaturePayload, type FileOperation, type FileSignatureInput } from '@paddock/protocol';

export type { FileOperation, FileSignatureInput };

/**
 * The signature envd checks on `/files` requests that carry no access token
 * (the format is in @paddock/protocol). WebCrypto, so that it runs in a
 * browser too.
 */
export async function fileSignature(input: FileSignatureInput): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(fileSignaturePayload(input)));
  return encodeFileSignature(new Uint8Array(digest));
}

/** Options of `fileUrl`. */
export interface FileUrlOptions {
  /** Base URL of envd; a path prefix is kept. */
  envdUrl: string;
  /** File to read or write; may be omitted for a multipart upload whose parts name their paths. */
  path?: string | undefined;
  /** Whether the URL reads or writes the file; part of what is signed. */
  operation: FileOperation;
  /** Sent as `username` (only when given) and signed. */
  user?: string | undefined;
  /** The sandbox's envd access token; without it the URL is not signed. */
  accessToken?: string | undefined;
  /** Seconds from now until the signature expires; needs `accessToken`. */
  expiresInSeconds?: number | undefined;
}

/**
 * URL of `/files` that works without any header: a browser link, a `curl`
 * command. Query: `username` (when given), `path` (when not empty),
 * `signature` and `signature_expiration` (when signed).
 */
export async function fileUrl(options: FileUrlOptions): Promise<string> {
  const { path = '', operation, user, accessToken, expiresInSeconds } = options;
  if (expiresInSeconds !== undefined && accessToken === undefined) {
    throw new EnvdArgumentError('expiresInSeconds', 'a signature expiration needs an access token to sign with');
  }
  const query = filesQuery(path, user);
  if (accessToken !== undefined) {
    const expiration = expiresInSeconds === undefined ? undefined : Math.floor(Date.now() / 1000) + expiresInSeconds;
    query.set('signature', await fileSignature({ path, operation, user, accessToken, expiration }));
    if (expiration !== undefined) query.set('signature_expiration', String(expiration));
  }
  return endpointUrl(options.envdUrl, '/files', query);
}

/** Query of `/files`: `username` only when a user is chosen, `path` only when there is one. */
export function filesQuery(path: string | undefined, user: string | undefined): URLSearchParams {
  const query = new URLSearchParams();
  if (user !== undefined) query.set('username', user);
  if (path) query.set('path', path);
  return query;
}

/** `endpoint` under `baseUrl`, keeping any path prefix of the base. */
export function endpointUrl(baseUrl: string, endpoint: string, query?: URLSearchParams): string {
  const url = new URL(baseUrl);
  url.pathname = url.pathname.replace(/\/+$/, '') + endpoint;
  url.search = query?.toString() ?? '';
  return url.toString();
}
