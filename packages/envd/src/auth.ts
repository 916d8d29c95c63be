// Access control of envd: the access token in `X-Access-Token`, signed
// `/files` URLs, and the acting user chosen with a Basic header. Every RPC
// and HTTP route is let in or refused by checkAccess alone.
import { createHash, timingSafeEqual } from 'node:crypto';
import { encodeFileSignature, fileSignaturePayload, type FileOperation } from '@paddock/protocol';

export type { FileOperation };

/** Compares secrets in constant time, whatever their lengths. */
export function secretsEqual(given: string | undefined | null, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The signature of a `/files` URL, in the protocol's format. */
export function fileSignature(path: string, operation: FileOperation, user: string, accessToken: string, expiration?: number): string {
  return encodeFileSignature(createHash('sha256').update(fileSignaturePayload({ path, operation, user, accessToken, expiration })).digest());
}

export type AccessCheck = { ok: true } | { ok: false; reason: string };

const ALLOWED: AccessCheck = { ok: true };

/**
 * Whether a request may go on, given envd's access token `expected`
 * (undefined while none is set: everything may), the token the request
 * presents in `X-Access-Token`, and, for `/files`, its query and operation,
 * whose signature stands in for the token.
 */
export function checkAccess(
  expected: string | undefined,
  presented: string | null | undefined,
  signedFile?: { params: URLSearchParams; op: FileOperation },
): AccessCheck {
  if (expected === undefined || secretsEqual(presented, expected)) return ALLOWED;
  if (signedFile?.params.has('signature')) return checkFileSignature(signedFile.params, signedFile.op, expected);
  return { ok: false, reason: 'missing or invalid access token' };
}

export function checkFileSignature(
  params: URLSearchParams,
  op: FileOperation,
  token: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): AccessCheck {
  const signature = params.get('signature');
  if (!signature) return { ok: false, reason: 'missing access token or signature' };
  const rawExpiration = params.get('signature_expiration');
  let expiration: number | undefined;
  if (rawExpiration !== null && rawExpiration !== '') {
    expiration = Number(rawExpiration);
    if (!Number.isSafeInteger(expiration)) {
      return { ok: false, reason: `signature_expiration '${rawExpiration}' is not a unix time in seconds` };
    }
  }
  const expected = fileSignature(params.get('path') ?? '', op, params.get('username') ?? '', token, expiration);
  if (!secretsEqual(signature, expected)) return { ok: false, reason: 'invalid signature' };
  if (expiration !== undefined && expiration < nowSeconds) return { ok: false, reason: 'signature is already expired' };
  return { ok: true };
}

/** The user named by `Authorization: Basic base64("{user}:")`, if any. */
export function basicAuthUser(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const name = decoded.includes(':') ? decoded.slice(0, decoded.indexOf(':')) : decoded;
  return name || undefined;
}
