// Signed `/files` URLs: a link that reads or writes one path as one user,
// usable without headers, until an optional expiration. The signature is
// "v1_" + base64(sha256("{path}:{operation}:{user}:{token}[:{expiration}]"))
// with the `=` padding removed. How the SHA-256 is computed is left to each
// side (WebCrypto in a browser is asynchronous, node:crypto is not); what is
// hashed and how the digest is written are here.

/** What a signed URL allows: downloading (`read`) or uploading (`write`). */
export type FileOperation = 'read' | 'write';

export interface FileSignatureInput {
  /** The path exactly as it goes into the `path` query parameter. */
  path: string;
  operation: FileOperation;
  /** The user as it goes into `username`; empty when none is given. */
  user?: string | undefined;
  accessToken: string;
  /** Unix seconds after which envd refuses the signature. */
  expiration?: number | undefined;
}

/** The query parameters of a signed URL. */
export const FILE_SIGNATURE_PARAM = 'signature';
export const FILE_SIGNATURE_EXPIRATION_PARAM = 'signature_expiration';

/** The operation a request with this method performs on `/files`. */
export function fileOperationOf(method: string): FileOperation {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/** The text whose SHA-256 digest is signed. */
export function fileSignaturePayload(input: FileSignatureInput): string {
  const raw = `${input.path}:${input.operation}:${input.user ?? ''}:${input.accessToken}`;
  return input.expiration === undefined ? raw : `${raw}:${input.expiration}`;
}

/** The signature, written from the payload's SHA-256 digest. */
export function encodeFileSignature(digest: Uint8Array): string {
  let binary = '';
  for (const byte of digest) binary += String.fromCharCode(byte);
  return `v1_${btoa(binary).replace(/=+$/, '')}`;
}
