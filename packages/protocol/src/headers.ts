// Header names of the protocol, lowercased as Node and fetch report them.

/** envd's access token on every request to envd. */
export const ACCESS_TOKEN_HEADER = 'x-access-token';
/** Names the sandbox when the host does not (one shared proxy URL for all sandboxes). */
export const SANDBOX_ID_HEADER = 'e2b-sandbox-id';
/** Names the sandbox's port with SANDBOX_ID_HEADER; ENVD_PORT when absent. */
export const SANDBOX_PORT_HEADER = 'e2b-sandbox-port';
/** The token a sandbox created with `allowPublicTraffic: false` asks of traffic to its own ports. */
export const TRAFFIC_ACCESS_TOKEN_HEADER = 'e2b-traffic-access-token';
/** Seconds between keepalive events a server stream asks envd for. */
export const KEEPALIVE_PING_HEADER = 'keepalive-ping-interval';
