// The builder's pieces that need no server: the quoting of commands built
// from caller input, ready commands, and the stand-in a browser build gets
// for COPY's Node-only files module.
import { execFileSync } from 'node:child_process';
import { FileUploadError, InvalidArgumentError, Template, waitForFile, waitForProcess, waitForURL } from '../src/index.js';
import { shellCommand, shellQuote } from '../src/shell.js';
import * as browserFiles from '../src/template-files-browser.js';

test.each(["it's", 'a b', '$(touch /tmp/pwned)', '`id`', 'semi;colon', '"double"', 'new\nline', ''])(
  'shellQuote(%j) is one word that bash reads back unchanged',
  (word) => {
    const echoed = execFileSync('bash', ['-c', `printf %s ${shellQuote(word)}`], { encoding: 'utf8' });
    expect(echoed).toBe(word);
  },
);

test('plain words stay unquoted; a command line quotes each word', () => {
  expect(shellQuote('/home/user/a-b_c.txt')).toBe('/home/user/a-b_c.txt');
  expect(shellCommand(['git', 'commit', '-m', "it's done"])).toBe("git commit -m 'it'\\''s done'");
});

test('ready commands quote what they are given', () => {
  expect(waitForFile("/tmp/it's ready").getCmd()).toBe("[ -f '/tmp/it'\\''s ready' ]");
  expect(waitForProcess('node server').getCmd()).toBe("pgrep 'node server' > /dev/null");
  expect(waitForURL('http://localhost:3000/health?a=1&b=2').getCmd()).toBe(
    "[ \"$(curl -s -o /dev/null -w '%{http_code}' 'http://localhost:3000/health?a=1&b=2')\" = 200 ]",
  );
});

test('toDockerfile shows each step as the server runs it, quoting arguments', () => {
  const t = Template()
    .fromImage('debian:stable')
    .makeDir('/srv/my dir', { mode: 0o755 })
    .aptInstall(['jq', 'curl'], { noInstallRecommends: true })
    .pipInstall('requests', { g: false })
    .copy('app', '/srv/app', { mode: 0o600 })
    .setEnvs({ A: '1', B: 'two words' })
    .setStartCmd('node server.js', 'true');
  expect(Template.toDockerfile(t)).toBe(
    [
      'FROM debian:stable',
      "RUN mkdir -p -m 0755 -- '/srv/my dir'",
      'RUN apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y --no-install-recommends jq curl',
      'RUN pip install --user requests',
      'COPY app /srv/app',
      'ENV A=1 B=two words',
      'ENTRYPOINT node server.js',
      '',
    ].join('\n'),
  );
  expect(() => Template.toDockerfile(Template().fromTemplate('base'))).toThrow(/no Dockerfile form/);
  expect(() => Template().fromTemplate('base').makeDir('/x', { mode: 0o17777 })).toThrow(InvalidArgumentError);
});

test('the browser stand-in of the files module refuses COPY with a FileUploadError saying why', async () => {
  const spec = { context: undefined, src: 'app', dest: '/app', ignore: [], resolveSymlinks: false };
  await expect(browserFiles.filesHash(spec)).rejects.toThrow(FileUploadError);
  await expect(browserFiles.packFiles(spec, true)).rejects.toThrow(/needs Node/);
  await expect(browserFiles.copyEntries(spec)).rejects.toBeInstanceOf(FileUploadError);
});
