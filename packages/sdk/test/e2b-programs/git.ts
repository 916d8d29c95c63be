// An e2b program: the git helpers.
import { GitAuthError, GitUpstreamError, Sandbox, type GitStatus } from 'e2b';

export async function main(): Promise<void> {
  const sbx = await Sandbox.create();
  try {
    await sbx.git.clone('https://git.example.com/org/repo.git', { path: 'repo', branch: 'main', depth: 1, username: 'me', password: 'token' });
  } catch (err) {
    if (err instanceof GitAuthError) console.error('credentials refused');
  }
  await sbx.git.init('fresh', { initialBranch: 'main' });
  await sbx.git.configureUser('Me', 'me@example.com');
  await sbx.git.setConfig('pull.rebase', 'false', { scope: 'local', path: 'fresh' });
  console.log(await sbx.git.getConfig('user.name'));
  await sbx.files.write('fresh/README.md', '# fresh');
  await sbx.git.add('fresh', { all: true });
  await sbx.git.commit('fresh', 'first', { authorName: 'Me', authorEmail: 'me@example.com' });
  const status: GitStatus = await sbx.git.status('fresh');
  console.log(status.currentBranch, status.isClean, status.fileStatus.map((f) => `${f.status} ${f.name}`));
  await sbx.git.createBranch('fresh', 'feature');
  await sbx.git.checkoutBranch('fresh', 'main');
  const { branches, currentBranch } = await sbx.git.branches('fresh');
  console.log(branches, currentBranch);
  await sbx.git.deleteBranch('fresh', 'feature', { force: true });
  await sbx.git.remoteAdd('fresh', 'origin', 'https://git.example.com/org/fresh.git', { overwrite: true });
  console.log(await sbx.git.remoteGet('fresh', 'origin'));
  await sbx.git.reset('fresh', { mode: 'hard', target: 'HEAD' });
  await sbx.git.restore('fresh', { paths: ['.'], staged: true });
  try {
    await sbx.git.push('fresh', { remote: 'origin', branch: 'main', setUpstream: true, username: 'me', password: 'token' });
    await sbx.git.pull('fresh', { timeoutMs: 60_000 });
  } catch (err) {
    if (err instanceof GitUpstreamError) console.error('no upstream');
  }
  await sbx.git.dangerouslyAuthenticate({ username: 'me', password: 'token', host: 'git.example.com' });
  await sbx.kill();
}
