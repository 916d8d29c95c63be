// The SDK's sandbox object for the pages that talk to envd (files,
// terminal), made from the details the control API gave this session: envd
// is reached through the sandbox proxy at `49983-{id}.{domain}` with the
// sandbox's access token in a header. Lifecycle calls go to the control API
// with the session instead, so this object is never asked for them.
import type { SandboxDetail } from '@paddock/control-client';
import { Sandbox } from '@paddock/sdk';

export function sdkSandbox(detail: SandboxDetail): Sandbox {
  return Sandbox.fromConnectionInfo(
    {
      sandboxId: detail.sandboxID,
      envdVersion: detail.envdVersion,
      envdAccessToken: detail.envdAccessToken,
      sandboxDomain: detail.domain ?? undefined,
    },
    detail.domain ? { domain: detail.domain } : {},
  );
}
