// Type-checked with `tsc --strict` under node16 and under bundler module
// resolution (tsconfig.node16.json, tsconfig.bundler.json); never run.
import { CommandExitError, E2B, Sandbox, Template, waitForPort, type CommandResult, type SandboxOpts } from '@paddock/sdk';
import { EnvdClient, type EnvdClientOptions } from '@paddock/envd-client';
import { ControlClient } from '@paddock/control-client';
import type { paths } from '@paddock/models/control';
import { Filesystem } from '@paddock/models';
import { ENVD_PORT } from '@paddock/protocol';

const opts: SandboxOpts = { timeoutMs: 60_000, metadata: { app: 'downstream' } };

export async function demo(): Promise<string> {
  const sbx: Sandbox = await Sandbox.create(opts);
  const result: CommandResult = await sbx.commands.run('echo hi');
  const text: string = await sbx.files.read('/home/user/x.txt');
  try {
    await sbx.commands.run('exit 1');
  } catch (e) {
    if (e instanceof CommandExitError) return `${e.exitCode}`;
  }
  await sbx.kill();
  return result.stdout + text;
}

const envdOptions: EnvdClientOptions = { envdUrl: `http://127.0.0.1:${ENVD_PORT}` };
export const envd = new EnvdClient(envdOptions);
export const control = new ControlClient({ apiUrl: 'http://127.0.0.1:3000', apiKey: 'key' });
export type SandboxPath = keyof paths;
export const service: string = Filesystem.typeName;

// A client with its options bound, and a template from a Dockerfile (both Node-only features type-check anywhere).
export const client = new E2B({ apiUrl: 'http://127.0.0.1:3000', apiKey: 'key', proxy: 'http://127.0.0.1:3128' });
export const fromDockerfile = Template().fromDockerfile('FROM debian:stable\nRUN true').setReadyCmd(waitForPort(8000));
export const built = client.Template.build(fromDockerfile, 'typed');
