// Template and the build API through the SDK, against a real Paddock server:
// every builder method in one template, the cache on a second build, a
// background build followed by status, tags, failing builds, and the ready
// commands run in a real sandbox, and a template from a Dockerfile.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BuildError,
  CommandExitError,
  InvalidArgumentError,
  LogEntryEnd,
  LogEntryStart,
  Sandbox,
  Template,
  waitForFile,
  waitForPort,
  waitForProcess,
  waitForTimeout,
  waitForURL,
  type ConnectionOpts,
  type LogEntry,
} from '../src/index.js';
import { eventually } from '../../../tools/testing/poll.mjs';
import { realServer, type RealServer } from './support/real-server.js';

let real: RealServer;
let work: string;
let context: string;
let opts: ConnectionOpts;

/** Writes a pure-Python wheel to /tmp, so that pipInstall has something to install with no package index. */
const MAKE_WHEEL = `import base64, hashlib, zipfile
name, version = 'sdk_hello', '1.0'
info = f'{name}-{version}.dist-info'
files = {
    f'{name}.py': b'def hello():\\n    return "hello from a wheel"\\n',
    f'{info}/METADATA': f'Metadata-Version: 2.1\\nName: sdk-hello\\nVersion: {version}\\n'.encode(),
    f'{info}/WHEEL': b'Wheel-Version: 1.0\\nGenerator: sdk-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = []
with zipfile.ZipFile(f'/tmp/{name}-{version}-py3-none-any.whl', 'w') as z:
    for path, data in files.items():
        z.writestr(path, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
        record.append(f'{path},sha256={digest},{len(data)}')
    record.append(f'{info}/RECORD,,')
    z.writestr(f'{info}/RECORD', '\\n'.join(record) + '\\n')
`;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'paddock-sdk-context-'));
  context = join(work, 'context');
  mkdirSync(join(context, 'app/sub'), { recursive: true });
  mkdirSync(join(context, 'pkg'));
  writeFileSync(join(context, 'single.txt'), 'single\n');
  writeFileSync(join(context, 'app/index.html'), '<p>served</p>\n');
  writeFileSync(join(context, 'app/sub/deep.txt'), 'deep\n');
  writeFileSync(join(context, 'app/skip-me.txt'), 'left out by fileIgnorePatterns\n');
  writeFileSync(join(context, 'app/debug.log'), 'left out by .dockerignore\n');
  writeFileSync(join(context, '.dockerignore'), '# logs stay home\n*.log\napp/*.log\n');
  symlinkSync('single.txt', join(context, 'link.txt'));
  writeFileSync(join(context, 'make_wheel.py'), MAKE_WHEEL);
  writeFileSync(join(context, 'pkg/package.json'), JSON.stringify({ name: 'sdk-local-pkg', version: '1.0.0', bin: { 'sdk-local-hello': 'hello.js' } }));
  writeFileSync(join(context, 'pkg/hello.js'), '#!/usr/bin/env node\nconsole.log("hello from npm");\n', { mode: 0o755 });
  writeFileSync(join(context, 'app.Dockerfile'), DOCKERFILE);
  real = await realServer('templates', { warmPoolSize: 0 });
  opts = real.opts;
}, 300_000);

afterAll(async () => {
  await real.teardown();
  rmSync(work, { recursive: true, force: true });
});

/** Every instruction fromDockerfile turns into a step, and some it only notes. */
const DOCKERFILE = `ARG BASE=e2bdev/base
FROM \${BASE}
ARG WHO=docker
ENV GREETING="hello from \${WHO}" \\
    PLAIN=plain
WORKDIR /srv/app
COPY --chown=user:user app/ ./site/
ADD --chmod=0640 /single.txt /opt/added.txt
RUN echo "$WHO built me" > built.txt && whoami >> built.txt
USER user
EXPOSE 8000
CMD ["python3", "-m", "http.server", "8000", "--directory", "/srv/app/site"]
`;

const everything = () =>
  Template({ fileContextPath: context, fileIgnorePatterns: ['app/skip-*'] })
    .fromTemplate('base')
    .setEnvs({ GREETING: 'hello', PIP_BREAK_SYSTEM_PACKAGES: '1', PIP_NO_INDEX: '1' })
    .copy('single.txt', '/home/user/single.txt')
    .copy('app', '/home/user/site')
    .copy(['link.txt'], '/home/user/link.txt')
    .copy('link.txt', '/home/user/resolved.txt', { resolveSymlinks: true, gzip: false })
    .copyItems([{ src: 'single.txt', dest: '/opt/owned.txt', user: 'root', mode: 0o600 }])
    .copy('pkg', '/home/user/pkg')
    .copy('make_wheel.py', '/tmp/make_wheel.py')
    .runCmd(['echo "$GREETING" > /tmp/greeting', 'whoami >> /tmp/greeting'])
    .runCmd('whoami > /tmp/root-who', { user: 'root' })
    .makeDir(['/home/user/made/a', '/home/user/made/b'], { mode: 0o750 })
    .rename('/home/user/made/b', '/home/user/made/c')
    .remove('/home/user/made/a', { recursive: true })
    .makeSymlink('/home/user/single.txt', '/home/user/single-link')
    .runCmd('python3 /tmp/make_wheel.py')
    .pipInstall('/tmp/sdk_hello-1.0-py3-none-any.whl')
    .npmInstall('/home/user/pkg', { g: true })
    .aptInstall(['jq'], { noInstallRecommends: true })
    .runCmd('git init -q -b trunk /tmp/src-repo && echo cloned > /tmp/src-repo/f && git -C /tmp/src-repo add f && git -C /tmp/src-repo -c user.name=a -c user.email=a@example.com commit -qm one')
    .gitClone('file:///tmp/src-repo', '/home/user/cloned', { branch: 'trunk' })
    .setUser('root')
    .runCmd('whoami > /tmp/set-user')
    .setUser('user')
    .setWorkdir('/home/user/site')
    .setStartCmd('python3 -m http.server 8000', waitForPort(8000));

test('one template with every builder method: its sandboxes show each step; a second build comes from the cache', async () => {
  const logs: LogEntry[] = [];
  const built = await Template.build(everything(), 'sdk-everything', { ...opts, onBuildLogs: (l) => logs.push(l) }).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\n${logs.slice(-15).join('\n')}`);
  });
  expect(built).toMatchObject({ name: 'sdk-everything', alias: 'sdk-everything', templateId: expect.any(String), buildId: expect.any(String) });
  expect(logs[0]).toBeInstanceOf(LogEntryStart);
  expect(logs.at(-1)).toBeInstanceOf(LogEntryEnd);
  expect(logs.map((l) => l.message)).toEqual(expect.arrayContaining(["Uploaded the files of 'app'", 'FROM template base']));

  const sbx = await Sandbox.create('sdk-everything', opts);
  const r = await sbx.commands.run(
    [
      'cat /tmp/greeting /tmp/root-who /tmp/set-user /home/user/single.txt /home/user/site/sub/deep.txt',
      'ls /home/user/site',
      'readlink /home/user/link.txt',
      'test -L /home/user/resolved.txt || cat /home/user/resolved.txt',
      'stat -c "%U %a" /opt/owned.txt',
      'ls /home/user/made; stat -c %a /home/user/made/c',
      'readlink /home/user/single-link',
      'python3 -c "import sdk_hello; print(sdk_hello.hello())"',
      'sdk-local-hello',
      "echo '{\"a\": 41}' | jq '.a + 1'",
      'cat /home/user/cloned/f',
      'pwd',
      'curl -s localhost:8000/index.html',
    ].join('; '),
  );
  expect(r.stdout).toBe(
    [
      'hello', 'user', 'root', 'root', 'single', 'deep',
      'index.html', 'sub',
      'single.txt',
      'single',
      'root 600',
      'c', '750',
      '/home/user/single.txt',
      'hello from a wheel',
      'hello from npm',
      '42',
      'cloned',
      '/home/user/site',
      '<p>served</p>',
      '',
    ].join('\n'),
  );
  await sbx.kill();

  const again: string[] = [];
  await Template.build(everything(), 'sdk-everything', { ...opts, onBuildLogs: (l) => again.push(l.message) });
  expect(again.filter((m) => m.startsWith('Uploaded'))).toEqual([]);
  expect(again).toContain("Files of 'app' are on the server already");
  expect(again.filter((m) => m.startsWith('CACHED')).length).toBeGreaterThan(10);
}, 600_000);

test('buildInBackground, followed by getBuildStatus with logsOffset; tags; exists', async () => {
  const t = Template({ fileContextPath: context })
    .fromBaseImage()
    .copy('app', '/srv/app')
    .setStartCmd('sleep 1; touch /tmp/up; sleep infinity', waitForFile('/tmp/up'));
  const info = await Template.buildInBackground(t, 'sdk-background:first', opts);
  expect(info).toMatchObject({ name: 'sdk-background:first', tags: expect.arrayContaining(['first']) });
  let offset = 0;
  const messages: string[] = [];
  let status = await Template.getBuildStatus(info, opts);
  await eventually(async () => {
    status = await Template.getBuildStatus(info, { ...opts, logsOffset: offset });
    offset += status.logEntries.length;
    messages.push(...status.logEntries.map((l) => l.message));
    return status.status === 'ready' || status.status === 'error';
  }, 'the build to end', 240_000);
  expect(status).toMatchObject({ status: 'ready', templateID: info.templateId, buildID: info.buildId });
  // Each entry came once: the offsets picked up where the last answer ended.
  expect(new Set(messages).size).toBeGreaterThan(1);
  expect((await Template.getBuildStatus(info, { ...opts, logsOffset: 0 })).logEntries.length).toBe(offset);

  expect(await Template.exists('sdk-background', opts)).toBe(true);
  expect(await Template.aliasExists('sdk-no-such-template', opts)).toBe(false);
  expect(await Template.assignTags('sdk-background:first', ['stable', 'v1'], opts)).toEqual({ buildId: info.buildId, tags: ['stable', 'v1'] });
  expect((await Template.getTags('sdk-background', opts)).map((t) => t.tag).sort()).toEqual(['first', 'stable', 'v1']);
  await Template.removeTags('sdk-background', 'v1', opts);
  const tags = await Template.getTags('sdk-background', opts);
  expect(tags.map((t) => t.tag).sort()).toEqual(['first', 'stable']);
  expect(tags[0]).toMatchObject({ buildId: info.buildId, createdAt: expect.any(Date) });

  const sbx = await Sandbox.create('sdk-background:stable', opts);
  expect((await sbx.commands.run('cat /srv/app/sub/deep.txt; ls /tmp/up')).stdout).toBe('deep\n/tmp/up\n');
  await sbx.kill();
}, 300_000);

test('a failing step is a BuildError with its reason; a registry type the server lacks is one at once', async () => {
  const logs: string[] = [];
  const failing = Template().fromTemplate('base').runCmd('echo about-to-fail; exit 3');
  const err = await Template.build(failing, 'sdk-failing', { ...opts, onBuildLogs: (l) => logs.push(l.message) }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(BuildError);
  expect((err as Error).message).toBe("the command 'echo about-to-fail; exit 3' failed: exit status 3");
  expect(logs).toContain('about-to-fail');

  const aws = Template().fromAWSRegistry('123.dkr.ecr.eu-west-1.amazonaws.com/app:1', { accessKeyId: 'AKIA', secretAccessKey: 's', region: 'eu-west-1' });
  const refused = await Template.build(aws, 'sdk-aws', opts).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(BuildError);
  expect(refused).toMatchObject({ statusCode: 400, message: "fromImageRegistry of type 'aws' is not supported; use type 'registry' with a username and password" });
}, 300_000);

test('refused before sending: a template without a base, a copy from outside the context, a COPY of nothing', async () => {
  await expect(Template.build(Template() as never, 'sdk-nobase', opts)).rejects.toBeInstanceOf(InvalidArgumentError);
  expect(() => Template().fromTemplate('base').copy('../outside', '/x')).toThrow(InvalidArgumentError);
  expect(() => Template().fromTemplate('base').copy('/etc/passwd', '/x')).toThrow(InvalidArgumentError);
  await expect(Template.build(Template({ fileContextPath: context }).fromTemplate('base').copy('nothing-*.txt', '/x'), 'sdk-nothing', opts)).rejects.toThrow(
    /^no files match 'nothing-\*\.txt' in /,
  );
  expect(Template.toDockerfile(Template().fromImage('debian:stable').setEnvs({ A: '1' }).runCmd('true').setWorkdir('/w'))).toBe(
    'FROM debian:stable\nENV A=1\nRUN true\nWORKDIR /w\n',
  );
});

test('a template from a Dockerfile (its path, or its text): each instruction shows in its sandboxes; CMD is the start command', async () => {
  const logs: LogEntry[] = [];
  const t = Template({ fileContextPath: context }).fromDockerfile(join(context, 'app.Dockerfile')).setReadyCmd(waitForPort(8000));
  await Template.build(t, 'sdk-dockerfile', { ...opts, onBuildLogs: (l) => logs.push(l) }).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\n${logs.slice(-15).join('\n')}`);
  });
  // What a template has no place for is told, not dropped silently.
  expect(logs.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual([
    `${join(context, 'app.Dockerfile')}:8: ADD copies '/single.txt' as it is; an archive is not unpacked`,
    `${join(context, 'app.Dockerfile')}:11: EXPOSE is ignored; a template has no place for it`,
  ]);
  expect(logs.map((l) => l.message)).toContain('FROM template base');

  const sbx = await Sandbox.create('sdk-dockerfile', opts);
  const r = await sbx.commands.run(
    [
      'echo "$GREETING/$PLAIN"',
      'pwd',
      'whoami',
      'cat built.txt',
      'stat -c "%U %n" site/index.html site/sub/deep.txt',
      'stat -c "%U %a" /opt/added.txt',
      'curl -s localhost:8000/sub/deep.txt',
    ].join('; '),
  );
  expect(r.stdout).toBe(
    [
      'hello from docker/plain',
      '/srv/app',
      'user',
      'docker built me', 'root',
      'user site/index.html', 'user site/sub/deep.txt',
      'root 640',
      'deep',
      '',
    ].join('\n'),
  );
  await sbx.kill();

  // The same Dockerfile as text, on an image: its Dockerfile form is the steps it became.
  const fromText = Template({ fileContextPath: context }).fromDockerfile('FROM debian:stable\nARG V=1\nENV A=$V\nRUN echo $V\nCMD sleep infinity');
  expect(Template.toDockerfile(fromText)).toBe('FROM debian:stable\nENV A=1\nRUN export V=1; echo $V\nUSER user\nWORKDIR /home/user\nENTRYPOINT sleep infinity\n');
  // What Docker would do differently is refused before anything is sent, naming the line.
  expect(() => Template().fromDockerfile('FROM debian AS a\nFROM debian\n')).toThrow(
    new InvalidArgumentError('Dockerfile:2: multi-stage builds are not supported (FROM on lines 1, 2); a template is built from one FROM'),
  );
  expect(() => Template().fromDockerfile('FROM debian\nCOPY ../secret /x\n')).toThrow(InvalidArgumentError);
}, 300_000);

test('the ready commands fail before their condition holds and succeed after, in a real sandbox', async () => {
  const sbx = await Sandbox.create('base', opts);
  const ready = async (cmd: string) => (await sbx.commands.run(cmd).catch((e: unknown) => e)) instanceof CommandExitError === false;
  const cases = [
    { cmd: waitForPort(8123).getCmd(), make: 'python3 -m http.server 8123 --directory /tmp' },
    { cmd: waitForURL('http://localhost:8124/ok.txt', 200).getCmd(), make: 'mkdir -p /tmp/u && echo ok > /tmp/u/ok.txt && python3 -m http.server 8124 --directory /tmp/u' },
    { cmd: waitForProcess('sdk-marker-proc').getCmd(), make: 'cp /bin/sleep /tmp/sdk-marker-proc && /tmp/sdk-marker-proc 600' },
    { cmd: waitForFile('/tmp/sdk-flag').getCmd(), make: 'touch /tmp/sdk-flag' },
  ];
  for (const { cmd, make } of cases) {
    expect([cmd, await ready(cmd)]).toEqual([cmd, false]);
    await sbx.commands.run(make, { background: true });
    await eventually(() => ready(cmd), `'${cmd}' to succeed`);
  }
  // A 404 is not the 200 asked for.
  expect(await ready(waitForURL('http://localhost:8124/missing', 200).getCmd())).toBe(false);
  expect(await ready(waitForURL('http://localhost:8124/missing', 404).getCmd())).toBe(true);
  expect(waitForTimeout(2500).getCmd()).toBe('sleep 2');
  expect(waitForTimeout(10).getCmd()).toBe('sleep 1');
  const started = Date.now();
  expect(await ready(waitForTimeout(1000).getCmd())).toBe(true);
  expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  await sbx.kill();
}, 120_000);
