// An e2b program: a client with its options bound (a proxy among them), and
// templates from a Dockerfile, given as text and as a path.
import { E2B, Sandbox, Template, waitForPort, type E2BClientOpts, type SandboxOpts } from 'e2b';

export async function main(): Promise<void> {
  const opts: E2BClientOpts = { apiKey: 'key', domain: 'example.com', requestTimeoutMs: 30_000, proxy: 'http://user:pass@127.0.0.1:8080' };
  const client = new E2B(opts);
  const sbx: Sandbox = await client.Sandbox.create('base', { timeoutMs: 60_000, metadata: { via: 'client' } });
  console.log((await sbx.commands.run('echo hi')).stdout);
  const same = await client.Sandbox.connect(sbx.sandboxId);
  console.log(same instanceof client.Sandbox, (await client.Sandbox.list({ limit: 10 }).nextItems()).length);
  await client.Sandbox.kill(sbx.sandboxId);

  const fromText = client
    .Template()
    .fromDockerfile('FROM python:3\nRUN pip install numpy\nCMD ["python", "-m", "http.server", "8000"]')
    .setReadyCmd(waitForPort(8000));
  const info = await client.Template.build(fromText, 'from-dockerfile', { cpuCount: 1, memoryMB: 512 });
  console.log(info.templateId, await client.Template.exists('from-dockerfile'));

  const fromFile = Template({ fileContextPath: '.' }).fromDockerfile('Dockerfile').runCmd('echo after').setStartCmd('node server.js', waitForPort(3000));
  await Template.build(fromFile, 'from-file', { apiKey: 'key', proxy: 'http://127.0.0.1:3128' });

  const direct: SandboxOpts = { proxy: 'http://127.0.0.1:3128', timeoutMs: 10_000 };
  await (await Sandbox.create(direct)).kill();
}
