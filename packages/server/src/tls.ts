// The server's certificate: read from its files at start and again when
// asked (SIGHUP), so that a renewed certificate is served without a restart.
// A file that cannot be read or does not hold a matching pair keeps the one
// being served, and says why.
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';

export interface TlsFiles {
  cert: string;
  key: string;
}

/** The certificate and key of `files`, checked to make a context (a key that is not the certificate's is refused here). */
export function readTls(files: TlsFiles): SecureContextOptions {
  let pair: SecureContextOptions;
  try {
    pair = { cert: readFileSync(files.cert), key: readFileSync(files.key) };
  } catch (err) {
    throw new Error(`the TLS certificate or key cannot be read: ${(err as Error).message}`, { cause: err });
  }
  try {
    createSecureContext(pair);
  } catch (err) {
    throw new Error(`the TLS certificate ${files.cert} and key ${files.key} do not make a pair: ${(err as Error).message}`, { cause: err });
  }
  return pair;
}

/** A server whose certificate can be swapped while it runs (https.Server, tls.Server). */
export interface SecureServer {
  setSecureContext(options: SecureContextOptions): void;
}
