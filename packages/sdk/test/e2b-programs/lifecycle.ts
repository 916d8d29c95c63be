// An e2b program: sandbox lifecycle, files and commands.
import { CommandExitError, FileType, Sandbox, type EntryInfo, type SandboxInfo } from 'e2b';

export async function main(): Promise<void> {
  const sbx = await Sandbox.create({ timeoutMs: 60_000, metadata: { job: 'lifecycle' }, envs: { MODE: 'test' } });
  const other = await Sandbox.create('base', { requestTimeoutMs: 30_000 });
  await sbx.files.write('hello.txt', 'hi');
  await sbx.files.write([{ path: 'a.txt', data: 'a' }, { path: 'b.bin', data: new Blob(['b']) }]);
  await sbx.files.writeFiles([{ path: 'c.txt', data: 'c' }]);
  const text: string = await sbx.files.read('hello.txt');
  const bytes: Uint8Array = await sbx.files.read('b.bin', { format: 'bytes' });
  const entries: EntryInfo[] = await sbx.files.list('/home/user', { depth: 2 });
  const dirs = entries.filter((e) => e.type === FileType.DIR).map((e) => e.name);
  const handle = await sbx.files.watchDir('/home/user', (event) => console.log(event.type, event.name), { recursive: true });
  await handle.stop();
  const result = await sbx.commands.run('echo $MODE', { onStdout: (line) => console.log(line), cwd: '/tmp', user: 'root' });
  const bg = await sbx.commands.run('sleep 10', { background: true });
  await bg.kill();
  try {
    await sbx.commands.run('exit 3');
  } catch (err) {
    if (err instanceof CommandExitError) console.log(err.exitCode, err.stderr);
  }
  const info: SandboxInfo = await sbx.getInfo();
  console.log(text, bytes.length, dirs, result.stdout, info.templateId, info.endAt.toISOString(), sbx.getHost(3000));
  const paginator = Sandbox.list({ query: { metadata: { job: 'lifecycle' }, state: ['running'] } });
  while (paginator.hasNext) for (const s of await paginator.nextItems()) console.log(s.sandboxId, s.state);
  await sbx.setTimeout(120_000);
  await sbx.pause();
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
  console.log(await again.isRunning(), await again.getMetrics());
  await Sandbox.kill(other.sandboxId);
  await again.kill();
}
