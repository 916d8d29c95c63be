// What a browser build of the SDK has in place of proxy.ts (mapped by the
// package's `browser` field): a page's requests go through the browser's
// own proxy settings, so the `proxy` option is refused, not ignored.
import type * as NodeProxy from './proxy.js';
import { InvalidArgumentError } from './errors.js';

function noProxy(): never {
  throw new InvalidArgumentError("the proxy option needs Node; in a browser, requests go through the browser's own proxy settings");
}

export const proxyFetch: typeof NodeProxy.proxyFetch = () => noProxy();
export const envdProxyOptions: typeof NodeProxy.envdProxyOptions = () => noProxy();
