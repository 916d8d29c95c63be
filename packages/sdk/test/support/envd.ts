// Starts a real envd process (the built @paddock/envd) for a test, the way
// a sandbox runs it but on the host: as root, on a free TCP port, with its
// own passwd/group files whose users live under a temporary directory. The
// SDK reaches it through `sandboxUrl`, exactly as it reaches the shared
// sandbox proxy; envd ignores the routing headers.
import { startLocalEnvd } from '../../../../tools/testing/local-envd.mjs';
import { Sandbox } from '../../src/index.js';

export interface LocalEnvd {
  url: string;
  token: string;
  /** Temporary directory: homes under home/, scratch space under work/. */
  dir: string;
  home: { root: string; user: string };
  /** A Sandbox object for this envd, built without any control API. */
  sandbox(options?: { token?: string }): Sandbox;
  stop(): Promise<void>;
}

export async function startEnvd(): Promise<LocalEnvd> {
  const token = `tok-${process.pid}-${Date.now()}`;
  const envd = await startLocalEnvd({ prefix: 'sdk-envd-', token });
  return {
    url: envd.url,
    token,
    dir: envd.dir,
    home: envd.home,
    sandbox: (options = {}) =>
      Sandbox.fromConnectionInfo(
        { sandboxId: 'local-envd', envdVersion: '0.7.0', envdAccessToken: options.token ?? token },
        { sandboxUrl: envd.url, apiKey: 'unused-no-control-api-here' },
      ),
    stop: () => envd.stop(),
  };
}

/** An envd and a Sandbox object for it with its token, as most test files share them. */
export async function startEnvdWithSandbox(): Promise<{ envd: LocalEnvd; sbx: Sandbox }> {
  const envd = await startEnvd();
  return { envd, sbx: envd.sandbox() };
}
