// An e2b program: a template, built and followed.
import {
  BuildError,
  Template,
  defaultBuildLogger,
  waitForFile,
  waitForPort,
  waitForProcess,
  waitForTimeout,
  waitForURL,
  type BuildInfo,
  type LogEntry,
} from 'e2b';

export async function main(): Promise<void> {
  const template = Template({ fileContextPath: '.', fileIgnorePatterns: ['*.log'] })
    .fromImage('debian:stable')
    .aptInstall(['curl', 'git'], { noInstallRecommends: true })
    .pipInstall(['requests'])
    .npmInstall('typescript', { g: true })
    .copy('app', '/app')
    .copy(['a.txt', 'b.txt'], '/data/', { user: 'root', mode: 0o644 })
    .runCmd(['echo one', 'echo two'], { user: 'root' })
    .makeDir('/data/cache')
    .makeSymlink('/app', '/srv/app')
    .setEnvs({ NODE_ENV: 'production' })
    .setWorkdir('/app')
    .setUser('user')
    .setStartCmd('node server.js', waitForPort(3000));
  const logs: LogEntry[] = [];
  const info: BuildInfo = await Template.build(template, 'my-app:v1', {
    cpuCount: 2,
    memoryMB: 1024,
    skipCache: false,
    onBuildLogs: (entry) => logs.push(entry),
  });
  await Template.build(template, { alias: 'my-app', onBuildLogs: defaultBuildLogger({ minLevel: 'debug' }) });
  const background = await Template.buildInBackground(Template().fromTemplate('base').setReadyCmd(waitForFile('/tmp/ready')), 'bg');
  const status = await Template.getBuildStatus(background, { logsOffset: 0 });
  if (status.status === 'error') throw new BuildError(status.reason?.message ?? 'failed');
  console.log(info.templateId, info.buildId, status.logEntries.map((l) => l.message), logs.length);
  for (const ready of [waitForURL('http://localhost:3000/health', 200), waitForProcess('node'), waitForTimeout(5_000)]) console.log(ready.getCmd());
  console.log(await Template.exists('my-app'), await Template.getTags('my-app'));
  await Template.assignTags('my-app:v1', ['stable']);
  await Template.removeTags('my-app', 'stable');
}
