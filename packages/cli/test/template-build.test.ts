// `paddock template build/logs/delete`: a Dockerfile read into build steps,
// and the real command building it against a real server, whose sandboxes
// then show what each instruction did.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create as createTar } from 'tar';
import { eventually, run, testServer, type TestServer } from '../../server/test/harness.js';
import { parseDockerfile } from '@paddock/sdk';
import { runPaddock } from './run-cli.js';

describe('a Dockerfile read as build steps', () => {
  const steps = (text: string, buildArgs?: Record<string, string>) => parseDockerfile(text, { buildArgs });

  test('FROM e2bdev/base is the base template, built as root in / and left as user in /home/user', () => {
    expect(steps('FROM e2bdev/base\nRUN apt-get update\n')).toEqual({
      from: { fromTemplate: 'base' },
      steps: [
        { type: 'USER', args: ['root'], line: 1 },
        { type: 'WORKDIR', args: ['/'], line: 1 },
        { type: 'RUN', args: ['apt-get update'], line: 2 },
        { type: 'USER', args: ['user'], line: 2 },
        { type: 'WORKDIR', args: ['/home/user'], line: 2 },
      ],
      notes: [],
    });
  });

  test('any other FROM is an image, whose own user and workdir the steps keep; USER and WORKDIR in the Dockerfile stay last', () => {
    expect(steps('FROM python:3.12-slim AS app\nWORKDIR /srv\nUSER nobody:nogroup\n')).toEqual({
      from: { fromImage: 'python:3.12-slim' },
      steps: [
        { type: 'WORKDIR', args: ['/srv'], line: 2 },
        { type: 'USER', args: ['nobody'], line: 3 },
      ],
      notes: ["Dockerfile:3: USER nobody:nogroup: the group is not used; processes run with nobody's own groups"],
    });
  });

  test('ARG defaults and --build-arg values are substituted; RUN gets the ARGs as its environment', () => {
    const plan = steps(
      [
        'ARG IMAGE=python',
        'FROM ${IMAGE}:3',
        'ARG VERSION=1.0',
        'ARG WHO',
        'ARG UNSET',
        'ENV APP=v${VERSION} GREETING="hello ${WHO:-nobody}" SINGLE=\'$VERSION\' BARE=${UNSET:-fallback}',
        'ENV LEGACY form with spaces',
        'ENV PATH=/opt/bin:$PATH',
        'WORKDIR /srv/$VERSION',
        'RUN echo "$VERSION"',
      ].join('\n'),
      { WHO: 'world', STRAY: 'x' },
    );
    expect(plan.from).toEqual({ fromImage: 'python:3' });
    expect(plan.steps.slice(0, 5).map((s) => [s.type, ...s.args])).toEqual([
      ['ENV', 'APP', 'v1.0', 'GREETING', 'hello world', 'SINGLE', '$VERSION', 'BARE', 'fallback'],
      ['ENV', 'LEGACY', 'form with spaces'],
      ['ENV', 'PATH', '/opt/bin:$PATH'],
      ['WORKDIR', '/srv/1.0'],
      ['RUN', 'export VERSION=1.0 WHO=world; echo "$VERSION"'],
    ]);
    expect(plan.notes).toEqual([
      "Dockerfile:8: $PATH is not set by the Dockerfile (the base image may set it); the build takes it from the image's environment",
      '--build-arg STRAY is not used: the Dockerfile declares no ARG STRAY',
    ]);
  });

  test('RUN in exec form and as a here-document; CMD and ENTRYPOINT as one start command line', () => {
    const plan = steps(['FROM debian', 'RUN ["printf", "%s|", "two words", "it\'s"]', 'RUN <<EOF', 'echo one', 'echo two', 'EOF', 'ENTRYPOINT ["/entry.sh", "--port", "80"]', 'CMD ["serve", "a b"]'].join('\n'));
    expect(plan.steps.filter((s) => s.type === 'RUN').map((s) => s.args)).toEqual([["printf '%s|' 'two words' 'it'\\''s'"], ['echo one\necho two']]);
    expect(plan.startCmd).toBe("/entry.sh --port 80 serve 'a b'");
    expect(steps('FROM debian\nCMD python3 -m http.server 8000').startCmd).toBe('python3 -m http.server 8000');
    expect(steps('FROM debian\nENTRYPOINT ["tini", "--"]\nCMD exec server').startCmd).toBe("tini -- /bin/sh -c 'exec server'");
    const shellEntry = steps('FROM debian\nCMD ["ignored"]\nENTRYPOINT /start.sh');
    expect([shellEntry.startCmd, shellEntry.notes]).toEqual(['/start.sh', ['CMD is not used: an ENTRYPOINT in shell form takes no arguments']]);
  });

  test('COPY and ADD: flags, several sources, JSON form; each source is a step of its own', () => {
    const plan = steps('FROM debian\nCOPY --chown=app:app --chmod=755 a.txt dir/ /opt/\nADD ["with space.txt", "rel/dest"]\nCOPY --link x /x');
    expect(plan.steps.filter((s) => s.type === 'COPY')).toEqual([
      { type: 'COPY', args: ['a.txt', '/opt/', 'app:app', '0755'], line: 2, source: 'a.txt', add: false },
      { type: 'COPY', args: ['dir/', '/opt/', 'app:app', '0755'], line: 2, source: 'dir/', add: false },
      { type: 'COPY', args: ['with space.txt', 'rel/dest', 'root'], line: 3, source: 'with space.txt', add: true },
      { type: 'COPY', args: ['x', '/x', 'root'], line: 4, source: 'x', add: false },
    ]);
    expect(plan.notes).toEqual(['Dockerfile:4: COPY --link is ignored; every step is a layer of its own']);
  });

  test('instructions a template has no place for are ignored with a note', () => {
    expect(steps('FROM debian\nEXPOSE 80\nLABEL a=b\nVOLUME /data\nSTOPSIGNAL SIGINT').notes).toEqual(
      ['EXPOSE:2', 'LABEL:3', 'VOLUME:4', 'STOPSIGNAL:5'].map((x) => {
        const [k, n] = x.split(':');
        return `Dockerfile:${n}: ${k} is ignored; a template has no place for it`;
      }),
    );
  });

  test('HEALTHCHECK CMD is the ready command, in shell or exec form; its options are noted, NONE clears it, the last one counts', () => {
    expect(steps('FROM debian\nARG PORT=8000\nHEALTHCHECK --interval=5s --retries=3 CMD curl -sf http://localhost:$PORT/health')).toMatchObject({
      readyCmd: 'curl -sf http://localhost:8000/health',
      notes: ['Dockerfile:3: HEALTHCHECK --interval=5s --retries=3 is ignored; the ready command runs until it succeeds'],
    });
    expect(steps('FROM debian\nHEALTHCHECK CMD ["test", "-f", "/tmp/up file"]').readyCmd).toBe("test -f '/tmp/up file'");
    expect(steps('FROM debian\nHEALTHCHECK CMD true\nHEALTHCHECK NONE').readyCmd).toBeUndefined();
    expect(() => steps('FROM debian\nHEALTHCHECK --interval=1s')).toThrow('Dockerfile:2: HEALTHCHECK takes CMD <command> or NONE');
  });

  test.each([
    ['', 'Dockerfile has no FROM instruction'],
    ['FROM debian AS build\nRUN make\nFROM debian\nCOPY --from=build /out /out', 'Dockerfile:3: multi-stage builds are not supported (FROM on lines 1, 3); a template is built from one FROM'],
    ['FROM debian\nCOPY --from=alpine /etc/os-release /x', 'Dockerfile:2: COPY --from=alpine copies from another stage or image; multi-stage builds are not supported'],
    ['FROM debian\nADD https://example.com/app.tar.gz /app/', "Dockerfile:2: ADD of the URL 'https://example.com/app.tar.gz' is not supported; download it in a RUN step (curl or wget) instead"],
    ['FROM debian\nADD git@github.com:x/y.git /src', "Dockerfile:2: ADD of the URL 'git@github.com:x/y.git' is not supported; download it in a RUN step (curl or wget) instead"],
    ['FROM debian\nCOPY a b /dest', "Dockerfile:2: COPY of several sources needs a destination directory ending in '/' (not '/dest')"],
    ['FROM debian\nCOPY --chmod=u+x a /a', 'Dockerfile:2: COPY --chmod=u+x: give an octal mode like 0755'],
    ['FROM debian\nRUN --mount=type=cache,target=/root/.cache pip install x', 'Dockerfile:2: RUN --mount is not supported'],
    ['FROM debian\nSHELL ["/bin/bash", "-c"]', "Dockerfile:2: SHELL is not supported; RUN steps run with the image's bash (or sh)"],
    ['RUN true\nFROM debian', 'Dockerfile:1: RUN comes before FROM; only ARG may'],
    ['FROM debian\nFROBNICATE x', "Dockerfile:2: unknown instruction 'FROBNICATE'"],
    ['FROM debian\nCOPY <<EOF /x\nhi\nEOF', 'Dockerfile:2: COPY from a here-document is not supported; write the file into the build context'],
  ])('%j is refused: %s', (text, message) => {
    expect(() => steps(text)).toThrow(message);
  });
});

describe('the command against a real server', () => {

  let t: TestServer;
  let work: string;
  let home: string;
  beforeAll(async () => {
    t = await testServer();
    work = mkdtempSync(join(tmpdir(), 'paddock-cli-build-'));
    home = join(work, 'home');
    mkdirSync(home);
  }, 120_000);
  afterAll(async () => {
    await t?.teardown();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** Runs `paddock` as a process (the server runs in this one, so never synchronously). */
  const paddock = (args: string[], opts: { apiUrl?: string; cwd?: string } = {}, timeoutMs = 300_000) =>
    runPaddock(args, { home, apiUrl: opts.apiUrl ?? t.server.apiUrl, cwd: opts.cwd, timeoutMs });

  /** A build context: files by relative path. */
  function context(name: string, files: Record<string, string | Buffer>): string {
    const dir = join(work, name);
    for (const [path, body] of Object.entries(files)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), body);
    }
    return dir;
  }

  const DOCKERFILE = `ARG BASE=e2bdev/base
FROM \${BASE}
ARG VERSION=1.0
ARG WHO
ENV APP_VERSION=\${VERSION} GREETING="hello \${WHO}"
COPY single.txt /opt/
COPY --chown=user:user --chmod=0750 app /opt/app
COPY *.txt /opt/texts/
RUN echo "v$VERSION by $(whoami) in $(pwd)" > /opt/run.txt && cat /opt/app/sub/deep.txt >> /opt/run.txt
WORKDIR /opt/app
USER user
RUN whoami > who.txt
EXPOSE 8000
CMD ["sh", "-c", "echo \\"$GREETING\\" > /tmp/cmd.txt; exec sleep infinity"]
`;

  let app: string;
  let firstBuild: string;

  test('template build runs the Dockerfile; sandboxes of the template show every instruction', async () => {
    app = context('app', {
      Dockerfile: DOCKERFILE,
      '.dockerignore': '# not for the template\napp/secret.txt\napp/*.log\n!app/keep.log\n',
      'single.txt': 'single\n',
      'app/main.txt': 'main\n',
      'app/sub/deep.txt': 'deep\n',
      'app/secret.txt': 'secret\n',
      'app/debug.log': 'log\n',
      'app/keep.log': 'kept\n',
    });
    const args = ['template', 'build', '--name', 'cli-built:v1', '--tag', 'extra', '--build-arg', 'WHO=world', '--ready-cmd', 'test -s /tmp/cmd.txt', '--cpu', '1', '--memory', '512'];
    const built = await paddock(args, { cwd: app });
    expect([built.code, built.stderr]).toEqual([0, '']);
    const lines = built.stdout.split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        'note: Dockerfile:13: EXPOSE is ignored; a template has no place for it',
        '[base] FROM template base',
        '[3] [3/10] ENV APP_VERSION=1.0 GREETING=hello world',
        '[7] [7/10] RUN export VERSION=1.0 WHO=world; echo "v$VERSION by $(whoami) in $(pwd)" > /opt/run.txt && cat /opt/app/sub/deep.txt >> /opt/run.txt',
        '[10] [10/10] RUN export VERSION=1.0 WHO=world; whoami > who.txt',
      ]),
    );
    expect(lines.find((l) => l.startsWith('COPY single.txt:'))).toMatch(/^COPY single.txt: 1 entry, 7 B, uploaded \(\d+ B compressed\)$/);
    // app, app/keep.log, app/main.txt, app/sub, app/sub/deep.txt: what .dockerignore leaves.
    expect(lines.find((l) => l.startsWith('COPY app:'))).toMatch(/^COPY app: 5 entries, 15 B, uploaded \(\d+ B compressed\)$/);
    const [, templateID, buildID] = /built template cli-built \((\w+)\), build ([0-9a-f-]{36}) \(tags: v1, extra\)$/m.exec(built.stdout)!;
    firstBuild = buildID!;

    const info = await t.control.getTemplate('cli-built', {});
    expect(info.template).toMatchObject({ templateID, names: ['cli-built'] });
    expect(info.template.builds[0]).toMatchObject({ buildID, status: 'ready', cpuCount: 1, memoryMB: 512 });
    const tags = await t.control.listTemplateTags(templateID!);
    expect(tags.map((x) => x.tag).sort()).toEqual(['extra', 'v1']);

    const s = await t.control.createSandbox({ templateID: 'cli-built:v1' });
    const r = await run(
      t.server,
      s.sandboxID,
      s.envdAccessToken,
      'cat /opt/single.txt; stat -c "%U:%G %a %n" /opt/single.txt /opt/app /opt/app/main.txt /opt/app/sub/deep.txt /opt/texts; ls /opt/app /opt/texts; cat /opt/run.txt /opt/app/who.txt; whoami; pwd; echo "$APP_VERSION|$GREETING"; cat /tmp/cmd.txt',
    );
    expect(r.stdout).toBe(
      [
        'single',
        'root:root 644 /opt/single.txt',
        'user:user 750 /opt/app',
        'user:user 750 /opt/app/main.txt',
        'user:user 750 /opt/app/sub/deep.txt',
        'root:root 755 /opt/texts',
        '/opt/app:',
        'keep.log',
        'main.txt',
        'sub',
        'who.txt',
        '',
        '/opt/texts:',
        'single.txt',
        'v1.0 by root in /',
        'deep',
        'user',
        'user',
        '/opt/app',
        '1.0|hello world',
        'hello world',
        '',
      ].join('\n'),
    );
    await t.control.killSandbox(s.sandboxID);
  }, 600_000);

  test('a second build of the same context uploads nothing and runs no step; --json prints the final status', async () => {
    const again = await paddock(['template', 'build', app, '--name', 'cli-built', '--build-arg', 'WHO=world', '--ready-cmd', 'test -s /tmp/cmd.txt', '--json']);
    expect(again.code).toBe(0);
    const status = JSON.parse(again.stdout) as { templateID: string; buildID: string; status: string; names: string[]; tags: string[] };
    expect(status).toEqual({ templateID: expect.any(String), buildID: expect.any(String), status: 'ready', names: ['cli-built'], tags: ['default'] });
    expect(status.buildID).not.toBe(firstBuild);
    // The log goes to stderr with --json.
    const log = again.stderr.split('\n');
    expect(log.filter((l) => l.startsWith('COPY ')).map((l) => l.replace(/: .*, /, ': ')).sort()).toEqual(['COPY app: already on the server', 'COPY single.txt: already on the server']);
    // Every step that makes files (all but ENV) is found in the cache.
    const started = log.filter((l) => /^\[\d+\] /.test(l)).map((l) => l.replace(/^\[\d+\] /, ''));
    expect(started.filter((l) => l.startsWith('CACHED '))).toHaveLength(9);
    expect(started.filter((l) => !l.startsWith('CACHED '))).toEqual(['[3/10] ENV APP_VERSION=1.0 GREETING=hello world']);
  }, 300_000);

  test('a failing RUN ends the build, and the command, in error with its reason and output', async () => {
    const dir = context('failing', { Dockerfile: 'FROM e2bdev/base\nRUN echo about-to-fail && exit 3\n' });
    const failed = await paddock(['template', 'build', dir, '--name', 'cli-failing', '--no-cache']);
    expect(failed.code).toBe(1);
    // The steps before it are cached by the first test's build, but --no-cache runs them.
    expect(failed.stdout).toContain('[1] [1/5] USER root\n');
    expect(failed.stdout).not.toContain('CACHED');
    expect(failed.stdout).toContain('[3] about-to-fail\n');
    expect(failed.stderr).toMatch(/^error: build [0-9a-f-]{36} failed at step 3: the command 'echo about-to-fail && exit 3' failed: exit status 3\n$/);

    const logs = await paddock(['template', 'logs', 'cli-failing']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain('[3] about-to-fail\n');
    expect(logs.stdout).toMatch(/build [0-9a-f-]{36} failed at step 3: the command 'echo about-to-fail && exit 3' failed: exit status 3\n$/);
  }, 300_000);

  describe('what is wrong locally is said before anything is sent', () => {
    let nowhere: string;
    beforeAll(async () => {
      // An address where nothing listens: a command that sent anything would fail saying no server runs there.
      const free = createServer();
      await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
      nowhere = `http://127.0.0.1:${(free.address() as AddressInfo).port}`;
      await new Promise((r) => free.close(r));
    });

    const cases: [string, Record<string, string>, string][] = [
      ['a multi-stage build', { Dockerfile: 'FROM e2bdev/base AS one\nRUN true\nFROM e2bdev/base\nCOPY --from=one /x /x\n' }, 'Dockerfile:3: multi-stage builds are not supported (FROM on lines 1, 3)'],
      ['ADD of a URL', { Dockerfile: 'FROM e2bdev/base\nADD https://example.com/app.tar.gz /app/\n' }, "Dockerfile:2: ADD of the URL 'https://example.com/app.tar.gz' is not supported"],
      ['a missing COPY source', { Dockerfile: 'FROM e2bdev/base\nCOPY nope.txt /x\n' }, "Dockerfile:2: COPY source 'nope.txt' is not in the build context"],
      ['a COPY glob that matches nothing', { Dockerfile: 'FROM e2bdev/base\nCOPY *.py /x/\n', 'a.txt': 'a' }, "Dockerfile:2: COPY source '*.py' matches nothing in the build context"],
      ['a source all excluded', { Dockerfile: 'FROM e2bdev/base\nCOPY secrets /x\n', 'secrets/key': 'k', '.dockerignore': 'secrets\n' }, "Dockerfile:2: COPY source 'secrets' is excluded by"],
      ['a source outside the context', { Dockerfile: 'FROM e2bdev/base\nCOPY ../etc/passwd /x\n' }, "Dockerfile:2: COPY source '../etc/passwd' is outside the build context"],
      ['a .dockerignore pattern that is not one', { Dockerfile: 'FROM e2bdev/base\nCOPY a.txt /x\n', 'a.txt': 'a', '.dockerignore': '*.log\n[\n' }, ".dockerignore:2: '[' is not a pattern"],
    ];

    test.each(cases)('%s', async (name, files, message) => {
      const dir = context(`bad-${name.replace(/\W+/g, '-')}`, files);
      const res = await paddock(['template', 'build', '.', '--name', 'never-sent'], { apiUrl: nowhere, cwd: dir });
      expect([res.code, res.stdout]).toEqual([1, '']);
      expect(res.stderr).toContain(`error: ${message}`);
    });

    test('ADD of a local archive, which Docker would unpack', async () => {
      const dir = context('bad-add-archive', { Dockerfile: 'FROM e2bdev/base\nADD files.tar.gz /opt/\n', 'x.txt': 'x' });
      await createTar({ cwd: dir, file: join(dir, 'files.tar.gz'), gzip: true }, ['x.txt']);
      const res = await paddock(['template', 'build', '.', '--name', 'never-sent'], { apiUrl: nowhere, cwd: dir });
      expect([res.code, res.stderr]).toEqual([1, "error: Dockerfile:2: ADD of the gzip archive 'files.tar.gz' would unpack it, which is not supported; COPY it and unpack it in a RUN step\n"]);
    });

    test('build, logs and delete have --help; a missing --name or a bad --cpu is a usage error', async () => {
      for (const c of [['template', 'build'], ['template', 'logs'], ['template', 'delete']]) {
        const help = await paddock([...c, '--help'], { apiUrl: nowhere });
        expect([c.join(' '), help.code, help.stdout]).toEqual([c.join(' '), 0, expect.stringContaining(`Usage: paddock ${c.join(' ')}`)]);
      }
      const noName = await paddock(['template', 'build', '.'], { apiUrl: nowhere, cwd: work });
      expect([noName.code, noName.stderr]).toEqual([2, expect.stringContaining("required option '--name <name[:tag]>' not specified")]);
      const badCpu = await paddock(['template', 'build', '--name', 'x', '--cpu', '0'], { apiUrl: nowhere, cwd: work });
      expect([badCpu.code, badCpu.stderr]).toEqual([2, expect.stringContaining("'0' is not a whole number of CPUs")]);
    });

    test('no template was made by any of them', async () => {
      expect((await t.control.listTemplates()).map((x) => x.names).flat()).not.toContain('never-sent');
    });
  });

  test('template logs: the latest build or a given one, and --follow while one runs', async () => {
    const latest = await paddock(['template', 'logs', 'cli-built']);
    expect(latest.code).toBe(0);
    expect(latest.stdout).toContain('[10] CACHED [10/10] RUN export VERSION=1.0 WHO=world; whoami > who.txt\n');
    expect(latest.stdout).toMatch(/build [0-9a-f-]{36} is ready\n$/);
    const first = await paddock(['template', 'logs', 'cli-built', firstBuild, '--json']);
    const firstLog = JSON.parse(first.stdout) as { buildID: string; status: string; logEntries: Array<{ message: string; step?: string; level: string; timestamp: string }> };
    expect(firstLog).toMatchObject({ buildID: firstBuild, status: 'ready' });
    expect(firstLog.logEntries).toContainEqual({ timestamp: expect.any(String), level: 'info', step: '10', message: '[10/10] RUN export VERSION=1.0 WHO=world; whoami > who.txt' });

    const dir = context('slow', { Dockerfile: 'FROM e2bdev/base\nRUN sleep 8 && echo slow-done\nCMD ["ignored"]\n' });
    const building = paddock(['template', 'build', dir, '--name', 'cli-slow', '--cmd', 'sleep 3600']);
    await eventually(async () => {
      const ts = await t.control.listTemplates();
      return ts.some((x) => x.names.includes('cli-slow') && x.buildStatus === 'building');
    }, 'the slow build to start', 120_000, 200);
    const followed = await paddock(['template', 'logs', 'cli-slow', '--follow']);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toContain('[3] slow-done\n');
    expect(followed.stdout).toContain('[finalize] Start command: sleep 3600; ready command: (none)\n');
    expect(followed.stdout).toMatch(/build [0-9a-f-]{36} is ready\n$/);
    expect((await building).code).toBe(0);
  }, 300_000);

  test('template delete needs --yes, and says what it deleted', async () => {
    const { template: slow } = await t.control.getTemplate('cli-slow', {});
    const refused = await paddock(['template', 'delete', 'cli-slow']);
    expect([refused.code, refused.stderr]).toEqual([2, `error: not deleting template ${slow.templateID} (cli-slow) and its 1 build\npass --yes to delete it\n`]);
    expect((await t.control.getTemplate('cli-slow', {})).template.templateID).toBe(slow.templateID);

    const deleted = await paddock(['template', 'delete', 'cli-slow', '--yes']);
    expect([deleted.code, deleted.stdout]).toEqual([0, `deleted template ${slow.templateID} (cli-slow) and its 1 build\n`]);
    await expect(t.control.getTemplate('cli-slow', {})).rejects.toMatchObject({ status: 404 });

    // A template a sandbox runs from is not deleted; the server says which sandbox.
    const user = await t.control.createSandbox({ templateID: 'cli-built' });
    const inUse = await paddock(['template', 'delete', 'cli-built', '--yes']);
    expect([inUse.code, inUse.stderr]).toEqual([1, expect.stringContaining(`is used by sandbox ${user.sandboxID} (kill it first)`)]);
    await t.control.killSandbox(user.sandboxID);

    const json = await paddock(['template', 'rm', 'cli-built', '--yes', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ templateID: expect.any(String), names: ['cli-built'], builds: 2 });
    const missing = await paddock(['template', 'delete', 'cli-built', '--yes']);
    expect([missing.code, missing.stderr]).toEqual([4, "error: template 'cli-built' not found\n"]);
  }, 120_000);
});
