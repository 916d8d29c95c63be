// How sandboxes are named and reached: the id every API and host name
// carries, envd's port inside a sandbox, and the host name the sandbox
// proxy routes by (`{port}-{sandboxID}.{domain}`).

/** Port envd listens on inside a sandbox; the port a request names when it names none. */
export const ENVD_PORT = 49983;

/** What a sandbox id is: it is a DNS label, so lowercase letters and digits only. */
export const SANDBOX_ID_PATTERN = /^[a-z0-9]{1,63}$/;

export function isSandboxId(value: unknown): value is string {
  return typeof value === 'string' && SANDBOX_ID_PATTERN.test(value);
}

/** The host that reaches `port` of a sandbox through the proxy of `domain`. */
export function sandboxHost(port: number, sandboxId: string, domain: string): string {
  return `${port}-${sandboxId}.${domain}`;
}

const HOST_ROUTE = /^(\d{1,5})-([a-z0-9]{1,63})\./;

/**
 * The sandbox and port a proxy host name names, or undefined when the host
 * is not of the form `{port}-{sandboxID}.{domain}`. The port is not checked
 * to be a TCP port here: the caller answers that with its own error.
 */
export function parseSandboxHost(host: string): { port: number; sandboxId: string } | undefined {
  const m = HOST_ROUTE.exec(host);
  return m ? { port: Number(m[1]), sandboxId: m[2]! } : undefined;
}

export function isTcpPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}
