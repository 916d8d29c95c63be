// Node only (the package's `browser` field maps it to proxy-browser.ts): the
// `proxy` option. undici's ProxyAgent carries every request through an
// HTTP(S) proxy (a CONNECT tunnel); the control API's calls use undici's
// fetch through it, envd's HTTP routes the agent itself, and envd's Connect
// calls go over connect-web with that fetch, since connect-node takes no
// undici dispatcher.
import { createConnectTransport } from '@connectrpc/connect-web';
import type { NodeEnvdClientOptions } from '@paddock/envd-client';
import { ProxyAgent, fetch as undiciFetch } from 'undici';

/** One agent per proxy, for the life of the process, so that its connections are kept and reused. */
const agents = new Map<string, ProxyAgent>();

function agentFor(proxy: string): ProxyAgent {
  let agent = agents.get(proxy);
  if (!agent) {
    // Deadlines are the SDK's (signals): undici's own would end a quiet stream after five minutes.
    agent = new ProxyAgent({ uri: proxy, headersTimeout: 0, bodyTimeout: 0 });
    agents.set(proxy, agent);
  }
  return agent;
}

/**
 * fetch through the proxy. A Request of the global fetch is not one of
 * undici's own classes, so it is handed over as its parts.
 */
export function proxyFetch(proxy: string): (input: Request | string, init?: RequestInit) => Promise<Response> {
  const dispatcher = agentFor(proxy);
  return async (input, init) => {
    const request = input instanceof Request ? input : undefined;
    const url = request ? request.url : String(input);
    const response = await undiciFetch(url, {
      method: request?.method,
      headers: request ? [...request.headers] : undefined,
      body: request?.body ?? undefined,
      signal: request?.signal,
      ...(request?.body ? { duplex: 'half' as const } : {}),
      ...(init as object),
      dispatcher,
    } as Parameters<typeof undiciFetch>[1]);
    return response as unknown as Response;
  };
}

/** What an envd client needs to reach envd through the proxy. */
export function envdProxyOptions(proxy: string): Pick<NodeEnvdClientOptions, 'dispatcher' | 'createTransport'> {
  const fetchFn = proxyFetch(proxy);
  return {
    dispatcher: agentFor(proxy),
    createTransport: (options) => createConnectTransport({ ...options, fetch: (input, init) => fetchFn(input instanceof Request ? input : String(input), init) }),
  };
}
