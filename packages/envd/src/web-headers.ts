// Injected by build.mjs into envd's bundle for every free `Headers`: Connect
// turns each request's headers into a WHATWG Headers, and Node's own class
// is a lazy global whose first use loads all of Node's bundled fetch (with
// http2, tls, worker_threads, web streams and more): ~80 ms of the first
// command of every new sandbox on a 2-core host. The same class from the
// undici package, on its own, brings a small part of that. Only envd's
// bundle sees it; the global stays Node's.
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const Headers: typeof globalThis.Headers = require('undici/lib/web/fetch/headers.js').Headers;
