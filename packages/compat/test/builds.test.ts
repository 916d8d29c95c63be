// Template builds as a user of the official e2b SDK makes them: the
// `Template` builder (copy, runCmd, makeSymlink, setWorkdir, setEnvs,
// setUser, setStartCmd with its ready checks), `Template.build`, tags,
// background builds, cached rebuilds and failing steps.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuildError, Sandbox, Template, waitForFile, waitForPort, waitForURL } from 'e2b';
import { PASSWORD, startRegistry, USER, type TestRegistry } from '../../runtime/test/registry.js';
import { pushTestImages } from '../../runtime/test/test-images.js';
import { sleep, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
let registry: TestRegistry;
let work: string;
let context: string;
let scratch: string;

beforeAll(async () => {
  registry = await startRegistry();
  work = mkdtempSync(join(tmpdir(), 'paddock-compat-builds-'));
  scratch = (await pushTestImages(registry, work)).scratch;
  // The build context the SDK tars COPY sources from.
  context = join(work, 'context');
  mkdirSync(join(context, 'app/sub'), { recursive: true });
  writeFileSync(join(context, 'single.txt'), 'single\n');
  writeFileSync(join(context, 'app/index.html'), '<p>served</p>\n');
  writeFileSync(join(context, 'app/sub/deep.txt'), 'deep\n');
  symlinkSync('single.txt', join(context, 'link.txt'));
  c = await startForE2b();
}, 300_000);

afterAll(async () => {
  await c?.teardown();
  await registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const template = () =>
  Template({ fileContextPath: context })
    .fromTemplate('base')
    .setEnvs({ GREETING: 'hello' })
    .copy('single.txt', '/home/user/single.txt')
    .copy('app', '/home/user/site')
    .copy('link.txt', '/home/user/link.txt')
    .copy('link.txt', '/home/user/resolved.txt', { resolveSymlinks: true })
    .copy('single.txt', '/opt/owned.txt', { user: 'root', mode: 0o600 })
    .runCmd('echo "$GREETING from $(whoami)" > /tmp/greeting')
    .runCmd('whoami > /tmp/root-who', { user: 'root' })
    .makeSymlink('/home/user/single.txt', '/home/user/single-link')
    .setWorkdir('/home/user/site')
    .setStartCmd('python3 -m http.server 8000', waitForPort(8000));

test('a template with copies, commands, a symlink, a workdir and a start command: its sandboxes show each', async () => {
  const logs: string[] = [];
  const built = await Template.build(template(), 'sdk-built', { onBuildLogs: (l) => logs.push(l.message) });
  expect(built).toMatchObject({ name: 'sdk-built', templateId: expect.any(String), buildId: expect.any(String) });
  expect(logs).toEqual(expect.arrayContaining(['FROM template base', "[7/10] RUN echo \"$GREETING from $(whoami)\" > /tmp/greeting"]));

  const sbx = await Sandbox.create('sdk-built');
  const r = await sbx.commands.run(
    'cat /tmp/greeting /tmp/root-who /home/user/single.txt /home/user/site/sub/deep.txt; readlink /home/user/link.txt; ' +
      'test -L /home/user/resolved.txt || cat /home/user/resolved.txt; readlink /home/user/single-link; stat -c "%U %a" /opt/owned.txt; pwd; echo $GREETING; ' +
      'curl -s localhost:8000/index.html',
  );
  expect(r.stdout).toBe('hello from user\nroot\nsingle\ndeep\nsingle.txt\nsingle\n/home/user/single.txt\nroot 600\n/home/user/site\nhello\n<p>served</p>\n');
  await sbx.kill();

  // The same template again: every step is found in the cache, none runs.
  const again: string[] = [];
  await Template.build(template(), 'sdk-built:v2', { onBuildLogs: (l) => again.push(l.message) });
  expect(again.filter((m) => /^\[\d+\/10\]/.test(m))).toEqual(['[1/10] ENV GREETING=hello']);
  expect(again.filter((m) => m.startsWith('CACHED')).length).toBe(9);
  expect((await Template.getTags('sdk-built')).map((t) => t.tag).sort()).toEqual(['default', 'v2']);
  const tagged = await Sandbox.create('sdk-built:v2');
  expect((await tagged.commands.run('cat /tmp/greeting')).stdout).toBe('hello from user\n');
  await tagged.kill();
}, 300_000);

test('a template from a scratch busybox image: copy, user and ready file work without the image having any tool for them', async () => {
  const t = Template({ fileContextPath: context })
    .fromImage(scratch)
    .copy('app', '/srv/site')
    .setUser('runner')
    .runCmd('id -un > /tmp/who')
    .setStartCmd('touch /tmp/up; sleep 3600', waitForFile('/tmp/up'));
  await Template.build(t, 'sdk-scratch');
  const sbx = await Sandbox.create('sdk-scratch');
  expect((await sbx.commands.run('cat /tmp/who /srv/site/sub/deep.txt; id -un; ls /tmp/up')).stdout).toBe('runner\ndeep\nrunner\n/tmp/up\n');
  await sbx.kill();
}, 300_000);

test('a background build is followed with getBuildStatus until it is ready; waitForURL checks the start command', async () => {
  const t = Template({ fileContextPath: context })
    .fromTemplate('base')
    .copy('app', '/home/user/site')
    .setWorkdir('/home/user/site')
    .setStartCmd('python3 -m http.server 8001', waitForURL('http://localhost:8001/index.html', 200));
  const info = await Template.buildInBackground(t, 'sdk-background');
  let status = await Template.getBuildStatus(info);
  for (let i = 0; i < 600 && (status.status === 'building' || status.status === 'waiting'); i++) {
    await sleep(200);
    status = await Template.getBuildStatus(info);
  }
  expect(status).toMatchObject({ status: 'ready', templateID: info.templateId, buildID: info.buildId });
  const sbx = await Sandbox.create('sdk-background');
  expect((await sbx.commands.run('curl -s localhost:8001/index.html')).stdout).toBe('<p>served</p>\n');
  await sbx.kill();
}, 300_000);

test('a failing step fails the build with its error; so does a command as a user that does not exist', async () => {
  const logs: string[] = [];
  const failing = Template().fromTemplate('base').runCmd('echo about-to-fail; exit 3');
  await expect(Template.build(failing, 'sdk-failing', { onBuildLogs: (l) => logs.push(l.message) })).rejects.toThrow(BuildError);
  expect(logs).toContain('about-to-fail');
  await expect(Template.build(failing, 'sdk-failing')).rejects.toMatchObject({ message: "the command 'echo about-to-fail; exit 3' failed: exit status 3" });
  await expect(Template.build(Template().fromTemplate('base').runCmd('true', { user: 'nobody-here' }), 'sdk-nouser')).rejects.toMatchObject({
    name: 'BuildError',
    message: expect.stringContaining('nobody-here'),
  });
}, 300_000);

test('fromImage with registry credentials pulls from a registry that asks for them; without them the build fails naming the refusal', async () => {
  const locked = await startRegistry('htpasswd');
  try {
    const ref = (await pushTestImages(locked, mkdtempSync(join(work, 'locked-')))).scratch;
    await Template.build(Template().fromImage(ref, { username: USER, password: PASSWORD }).runCmd('echo in > /tmp/in'), 'sdk-locked');
    const sbx = await Sandbox.create('sdk-locked');
    expect((await sbx.commands.run('cat /tmp/in')).stdout).toBe('in\n');
    await sbx.kill();
    await expect(Template.build(Template().fromImage(ref), 'sdk-locked-anonymous')).rejects.toMatchObject({
      name: 'BuildError',
      message: expect.stringMatching(/requires a username and password, and none is configured for it$/),
    });
  } finally {
    await locked.stop();
  }
}, 300_000);

test("fromDockerfile: the SDK's own Dockerfile reading, on the base template for FROM e2bdev/base", async () => {
  const t = Template({ fileContextPath: context }).fromDockerfile('FROM e2bdev/base\nENV MODE=docker\nCOPY single.txt /home/user/from-docker.txt\nRUN echo "$MODE" > /tmp/mode\nWORKDIR /tmp\n');
  await Template.build(t, 'sdk-dockerfile');
  const sbx = await Sandbox.create('sdk-dockerfile');
  expect((await sbx.commands.run('cat /tmp/mode /home/user/from-docker.txt; pwd')).stdout).toBe('docker\nsingle\n/tmp\n');
  await sbx.kill();
}, 300_000);

// Through the sandboxes' egress path to the Debian mirror this host uses
// (the one place outside the machine CI may reach).
test('aptInstall installs a Debian package through the egress path', async () => {
  await Template.build(Template().fromTemplate('base').aptInstall(['jq']), 'sdk-apt');
  const sbx = await Sandbox.create('sdk-apt');
  expect((await sbx.commands.run(`echo '{"a": 41}' | jq '.a + 1'`)).stdout).toBe('42\n');
  await sbx.kill();
}, 300_000);

test('registries of cloud providers are refused at once, naming the type', async () => {
  const t = Template().fromAWSRegistry('123.dkr.ecr.eu-west-1.amazonaws.com/app:1', { accessKeyId: 'AKIA', secretAccessKey: 'secret', region: 'eu-west-1' });
  await expect(Template.build(t, 'sdk-aws')).rejects.toMatchObject({ name: 'BuildError', message: expect.stringContaining("fromImageRegistry of type 'aws' is not supported") });
});
