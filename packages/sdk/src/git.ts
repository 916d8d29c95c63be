// `sandbox.git`: E2B's git helpers, run as git commands in the sandbox through
// `sandbox.commands`. The base template has git; a template without it fails
// each call with CommandExitError (exit code 127).
import type { CommandStartOpts, Commands } from './commands.js';
import { CommandExitError, GitAuthError, GitUpstreamError, InvalidArgumentError, type CommandResult } from './errors.js';
import { shellCommand } from './shell.js';

/** What every git method takes: how its command runs. */
export type GitRequestOpts = Partial<Pick<CommandStartOpts, 'envs' | 'user' | 'cwd' | 'timeoutMs' | 'requestTimeoutMs'>>;

/** Options of `git.clone`. */
export interface GitCloneOpts extends GitRequestOpts {
  /** Where to clone to; git's default (the repository's name, in `cwd`) when omitted. */
  path?: string;
  /** Branch to check out; only that branch is fetched. */
  branch?: string;
  /** Shallow clone with this many commits. */
  depth?: number;
  /** User name for an http(s) URL. */
  username?: string;
  /** Password or token for an http(s) URL; needs `username`. */
  password?: string;
  /** Keep the credentials in the clone's `origin` URL. By default they are removed after the clone. */
  dangerouslyStoreCredentials?: boolean;
}

/** Options of `git.init`. */
export interface GitInitOpts extends GitRequestOpts {
  /** Make a bare repository (no working tree). */
  bare?: boolean;
  /** Name of the first branch, e.g. `main`. */
  initialBranch?: string;
}

/** Options of `git.remoteAdd`. */
export interface GitRemoteAddOpts extends GitRequestOpts {
  /** Fetch the remote once added. */
  fetch?: boolean;
  /** Change the URL when the remote exists, instead of failing. */
  overwrite?: boolean;
}

/** Options of `git.commit`. */
export interface GitCommitOpts extends GitRequestOpts {
  /** Author and committer name for this commit; git's configured `user.name` when omitted. */
  authorName?: string;
  /** Author and committer email for this commit; git's configured `user.email` when omitted. */
  authorEmail?: string;
  /** Commit even when nothing is staged. */
  allowEmpty?: boolean;
}

/** Options of `git.add`. */
export interface GitAddOpts extends GitRequestOpts {
  /** Paths to stage; everything when omitted. */
  files?: string[];
  /** With no `files`: stage removals too (`-A`, the default) rather than only the working directory (`.`). */
  all?: boolean;
}

/**
 * How `git.reset` treats the index and working tree, as git's `--soft`, `--mixed`, `--hard`, `--merge` and
 * `--keep`.
 */
export type GitResetMode = 'soft' | 'mixed' | 'hard' | 'merge' | 'keep';

/** Options of `git.reset`. */
export interface GitResetOpts extends GitRequestOpts {
  /** git's default (`mixed`) when omitted. */
  mode?: GitResetMode;
  /** Commit, branch or ref to reset to; HEAD when omitted. */
  target?: string;
  /** Only these paths. */
  paths?: string[];
}

/** Options of `git.restore`. */
export interface GitRestoreOpts extends GitRequestOpts {
  /** Paths to restore; `['.']` for all. */
  paths: string[];
  /** Restore the index (unstage). */
  staged?: boolean;
  /** Restore the working tree; the default when neither is given. */
  worktree?: boolean;
  /** Restore from this commit, branch or ref. */
  source?: string;
}

/** Options of `git.deleteBranch`. */
export interface GitDeleteBranchOpts extends GitRequestOpts {
  /** Delete even when not merged (`-D`). */
  force?: boolean;
}

/** Options of `git.push`. */
export interface GitPushOpts extends GitRequestOpts {
  /** Remote to push to; the upstream's (or git's default) when omitted. */
  remote?: string;
  /** Branch to push; the current one when omitted. */
  branch?: string;
  /** Make the pushed branch the upstream of the local one. Default true. */
  setUpstream?: boolean;
  /** User name for an http(s) remote, for this push only. */
  username?: string;
  /** Password or token for an http(s) remote, for this push only; needs `username`. */
  password?: string;
}

/** Options of `git.pull`. */
export interface GitPullOpts extends GitRequestOpts {
  /** Remote to pull from; the upstream's when omitted. */
  remote?: string;
  /** Branch to pull; the upstream branch when omitted. */
  branch?: string;
  /** User name for an http(s) remote, for this pull only. */
  username?: string;
  /** Password or token for an http(s) remote, for this pull only; needs `username`. */
  password?: string;
}

/** Which git config file a setting goes to: `--global`, `--local` (one repository) or `--system`. */
export type GitConfigScope = 'global' | 'local' | 'system';

/** Options of `git.setConfig`, `git.getConfig` and `git.configureUser`. */
export interface GitConfigOpts extends GitRequestOpts {
  /** Default `global`. */
  scope?: GitConfigScope;
  /** The repository, for scope `local`. */
  path?: string;
}

/** Options of `git.dangerouslyAuthenticate`. */
export interface GitDangerouslyAuthenticateOpts extends GitRequestOpts {
  /** User name to store. */
  username: string;
  /** Password or token to store. */
  password: string;
  /** Default `github.com`. */
  host?: string;
  /** Default `https`. */
  protocol?: string;
}

/** What happened to a file, read from its two `git status --porcelain` columns. */
export type GitStatusLabel = 'conflict' | 'renamed' | 'copied' | 'deleted' | 'added' | 'modified' | 'typechange' | 'untracked' | 'unknown';

/** One changed file in `git.status`. */
export interface GitFileStatus {
  /** Path relative to the repository; the new path of a rename. */
  name: string;
  /** What happened to the file. */
  status: GitStatusLabel;
  /** The index column of `git status --porcelain` (`' '` when unchanged). */
  indexStatus: string;
  /** The working tree column of `git status --porcelain`. */
  workingTreeStatus: string;
  /** Whether the change is in the index. */
  staged: boolean;
  /** Old path of a rename or copy. */
  renamedFrom?: string;
}

/** State of a repository, as `git.status` reads it from `git status --porcelain=1 --branch`. */
export interface GitStatus {
  /** Branch checked out; absent when HEAD is detached. */
  currentBranch?: string;
  /** Upstream of the current branch, e.g. `origin/main`; absent when it has none. */
  upstream?: string;
  /** Commits on the current branch that its upstream lacks. */
  ahead: number;
  /** Commits on the upstream that the current branch lacks. */
  behind: number;
  /** Whether HEAD is detached (no branch checked out). */
  detached: boolean;
  /** Each changed, staged or untracked file. */
  fileStatus: GitFileStatus[];
  /** Whether there is no changed, staged or untracked file. */
  isClean: boolean;
  /** Opposite of `isClean`. */
  hasChanges: boolean;
  /** Whether a change is staged. */
  hasStaged: boolean;
  /** Whether an untracked file exists. */
  hasUntracked: boolean;
  /** Whether a file has a merge conflict. */
  hasConflicts: boolean;
  /** Number of entries in `fileStatus`. */
  totalCount: number;
  /** Files with a staged change. */
  stagedCount: number;
  /** Files with no staged change (untracked ones included). */
  unstagedCount: number;
  /** Untracked files. */
  untrackedCount: number;
  /** Files with a merge conflict. */
  conflictCount: number;
}

/** Local branches of a repository. */
export interface GitBranches {
  /** Names of the local branches. */
  branches: string[];
  /** Branch checked out; absent when HEAD is detached. */
  currentBranch?: string;
}

/** git must never wait for a password on a terminal nobody is at. */
const GIT_ENV = { GIT_TERMINAL_PROMPT: '0' };

const RESET_MODES: readonly GitResetMode[] = ['soft', 'mixed', 'hard', 'merge', 'keep'];
const CONFIG_SCOPES: readonly GitConfigScope[] = ['global', 'local', 'system'];

/** What git prints when credentials were missing or refused. */
const AUTH_FAILURE = /authentication failed|terminal prompts disabled|could not read username|could not read password|invalid username or password|access denied|permission denied|not authorized|403 forbidden/i;
/** What git prints when a push or pull has nowhere to go. */
const NO_UPSTREAM = /has no upstream branch|no upstream configured|no tracking information|please specify which branch you want to merge with/i;

/** Runs git in the sandbox. Each method resolves to the command's result and throws `CommandExitError` when git fails. */
export class Git {
  readonly #commands: Commands;

  /** Use `sandbox.git` rather than making one. @param commands - Runs the git commands. */
  constructor(commands: Commands) {
    this.#commands = commands;
  }

  /** Clones a repository. With `username`/`password`, they are used for the clone and then removed from `origin`. */
  async clone(url: string, opts: GitCloneOpts = {}): Promise<CommandResult> {
    const { username, password, branch, depth, path, dangerouslyStoreCredentials, ...rest } = opts;
    const authUrl = withCredentials(url, username, password, 'clone');
    const target = path ?? (authUrl !== url && !dangerouslyStoreCredentials ? repositoryName(url) : undefined);
    const args = ['clone', authUrl];
    if (branch) args.push('--branch', branch, '--single-branch');
    if (depth !== undefined) args.push('--depth', String(positive('depth', depth)));
    if (target) args.push(target);
    const result = await authFailures('clone', () => this.#git(args, undefined, rest));
    if (authUrl !== url && !dangerouslyStoreCredentials) {
      await this.#git(['remote', 'set-url', 'origin', url], target, rest);
    }
    return result;
  }

  /** Makes a new repository at `path`. */
  async init(path: string, opts: GitInitOpts = {}): Promise<CommandResult> {
    const { bare, initialBranch, ...rest } = opts;
    const args = ['init'];
    if (initialBranch) args.push('--initial-branch', initialBranch);
    if (bare) args.push('--bare');
    return this.#git([...args, path], undefined, rest);
  }

  /** Adds a remote; with `overwrite`, an existing one gets the new URL. */
  async remoteAdd(path: string, name: string, url: string, opts: GitRemoteAddOpts = {}): Promise<CommandResult> {
    if (!name || !url) throw new InvalidArgumentError('remoteAdd needs a remote name and a URL');
    const { fetch, overwrite, ...rest } = opts;
    let result: CommandResult;
    if (overwrite && (await this.remoteGet(path, name, rest)) !== undefined) {
      result = await this.#git(['remote', 'set-url', name, url], path, rest);
    } else {
      result = await this.#git(['remote', 'add', name, url], path, rest);
    }
    return fetch ? this.#git(['fetch', name], path, rest) : result;
  }

  /** URL of a remote; undefined when there is no such remote. */
  async remoteGet(path: string, name: string, opts: GitRequestOpts = {}): Promise<string | undefined> {
    if (!name) throw new InvalidArgumentError('remoteGet needs a remote name');
    return this.#optional(['remote', 'get-url', name], path, opts);
  }

  /** Branch, upstream, ahead/behind and the state of each changed file. */
  async status(path: string, opts: GitRequestOpts = {}): Promise<GitStatus> {
    return parseStatus((await this.#git(['status', '--porcelain=1', '--branch'], path, opts)).stdout);
  }

  /** Local branches and the one checked out. */
  async branches(path: string, opts: GitRequestOpts = {}): Promise<GitBranches> {
    const { stdout } = await this.#git(['branch', '--format=%(HEAD)%(refname:short)'], path, opts);
    const result: GitBranches = { branches: [] };
    for (const line of stdout.split('\n')) {
      if (line.trim() === '') continue;
      const name = line.slice(1);
      result.branches.push(name);
      if (line.startsWith('*')) result.currentBranch = name;
    }
    return result;
  }

  /** Creates a branch and checks it out. */
  async createBranch(path: string, branch: string, opts: GitRequestOpts = {}): Promise<CommandResult> {
    return this.#git(['checkout', '-b', branch], path, opts);
  }

  /** Checks out an existing branch. */
  async checkoutBranch(path: string, branch: string, opts: GitRequestOpts = {}): Promise<CommandResult> {
    return this.#git(['checkout', branch], path, opts);
  }

  /** Deletes a local branch; only a merged one unless `force`. */
  async deleteBranch(path: string, branch: string, opts: GitDeleteBranchOpts = {}): Promise<CommandResult> {
    const { force, ...rest } = opts;
    return this.#git(['branch', force ? '-D' : '-d', branch], path, rest);
  }

  /** Stages `files`, or every change. */
  async add(path: string, opts: GitAddOpts = {}): Promise<CommandResult> {
    const { files, all = true, ...rest } = opts;
    const args = files && files.length > 0 ? ['--', ...files] : [all ? '-A' : '.'];
    return this.#git(['add', ...args], path, rest);
  }

  /** Commits what is staged, with `message`. */
  async commit(path: string, message: string, opts: GitCommitOpts = {}): Promise<CommandResult> {
    const { authorName, authorEmail, allowEmpty, ...rest } = opts;
    const identity: string[] = [];
    if (authorName) identity.push('-c', `user.name=${authorName}`);
    if (authorEmail) identity.push('-c', `user.email=${authorEmail}`);
    return this.#git([...identity, 'commit', '-m', message, ...(allowEmpty ? ['--allow-empty'] : [])], path, rest);
  }

  /** Runs `git reset`: moves HEAD to `target` and resets the index (and working tree, by `mode`). */
  async reset(path: string, opts: GitResetOpts = {}): Promise<CommandResult> {
    const { mode, target, paths, ...rest } = opts;
    if (mode !== undefined && !RESET_MODES.includes(mode)) {
      throw new InvalidArgumentError(`reset mode must be one of ${RESET_MODES.join(', ')}; got '${String(mode)}'`);
    }
    const args = ['reset'];
    if (mode) args.push(`--${mode}`);
    if (target) args.push(target);
    if (paths && paths.length > 0) args.push('--', ...paths);
    return this.#git(args, path, rest);
  }

  /** Restores files in the working tree (default) and/or the index. */
  async restore(path: string, opts: GitRestoreOpts): Promise<CommandResult> {
    const { paths, staged, worktree, source, ...rest } = opts;
    if (!paths || paths.length === 0) throw new InvalidArgumentError("restore needs at least one path (['.'] for all)");
    // Naming one side only restores that side; naming neither restores the working tree.
    const toIndex = staged ?? false;
    const toWorktree = worktree ?? !staged;
    if (!toIndex && !toWorktree) throw new InvalidArgumentError('restore needs staged or worktree to be true');
    const args = ['restore'];
    if (toWorktree) args.push('--worktree');
    if (toIndex) args.push('--staged');
    if (source) args.push('--source', source);
    return this.#git([...args, '--', ...paths], path, rest);
  }

  /** Pushes; with `username`/`password`, they are used for this push only. */
  async push(path: string, opts: GitPushOpts = {}): Promise<CommandResult> {
    const { remote, branch, setUpstream = true, username, password, ...rest } = opts;
    const args = (name: string | undefined): string[] => {
      const out = ['push'];
      if (setUpstream && name) out.push('--set-upstream');
      if (name) out.push(name);
      if (branch) out.push(branch);
      return out;
    };
    return this.#withRemote('push', path, remote, username, password, rest, (name) => this.#git(args(name), path, rest));
  }

  /** Pulls; without `remote` and `branch`, from the upstream branch, which must exist. */
  async pull(path: string, opts: GitPullOpts = {}): Promise<CommandResult> {
    const { remote, branch, username, password, ...rest } = opts;
    if (!remote && !branch && (await this.#optional(['rev-parse', '--abbrev-ref', '--symbolic-full-name', '@{upstream}'], path, rest)) === undefined) {
      throw new GitUpstreamError(upstreamMessage('pull'));
    }
    return this.#withRemote('pull', path, remote, username, password, rest, (name) =>
      this.#git(['pull', ...(name ? [name] : []), ...(branch ? [branch] : [])], path, rest),
    );
  }

  /** Sets a config value (global scope by default). */
  async setConfig(key: string, value: string, opts: GitConfigOpts = {}): Promise<CommandResult> {
    if (!key) throw new InvalidArgumentError('setConfig needs a key');
    const { scope, repo, rest } = configScope(opts);
    return this.#git(['config', scope, key, value], repo, rest);
  }

  /** A config value; undefined when it is not set in that scope. */
  async getConfig(key: string, opts: GitConfigOpts = {}): Promise<string | undefined> {
    if (!key) throw new InvalidArgumentError('getConfig needs a key');
    const { scope, repo, rest } = configScope(opts);
    return this.#optional(['config', scope, '--get', key], repo, rest);
  }

  /**
   * Stores credentials for a host in git's credential store, in plain text
   * in the user's home inside the sandbox, for every later git command.
   */
  async dangerouslyAuthenticate(opts: GitDangerouslyAuthenticateOpts): Promise<CommandResult> {
    const { username, password, host = 'github.com', protocol = 'https', ...rest } = opts;
    if (!username || !password) throw new InvalidArgumentError('dangerouslyAuthenticate needs a username and a password');
    await this.#git(['config', '--global', 'credential.helper', 'store'], undefined, rest);
    const input = `protocol=${protocol.trim()}\nhost=${host.trim()}\nusername=${username}\npassword=${password}\n\n`;
    return this.#run(`printf %s ${shellCommand([input])} | ${shellCommand(['git', 'credential', 'approve'])}`, rest);
  }

  /** Sets `user.name` and `user.email` (global scope by default). */
  async configureUser(name: string, email: string, opts: GitConfigOpts = {}): Promise<CommandResult> {
    if (!name || !email) throw new InvalidArgumentError('configureUser needs a name and an email');
    await this.setConfig('user.name', name, opts);
    return this.setConfig('user.email', email, opts);
  }

  #git(args: string[], repo: string | undefined, opts: GitRequestOpts): Promise<CommandResult> {
    return this.#run(shellCommand(['git', ...(repo ? ['-C', repo] : []), ...args]), opts);
  }

  #run(cmd: string, opts: GitRequestOpts): Promise<CommandResult> {
    return this.#commands.run(cmd, { ...opts, envs: { ...GIT_ENV, ...opts.envs } });
  }

  /** The trimmed output of a git command that fails when there is nothing to print; undefined then. */
  async #optional(args: string[], repo: string | undefined, opts: GitRequestOpts): Promise<string | undefined> {
    try {
      const out = (await this.#git(args, repo, opts)).stdout.trim();
      return out === '' ? undefined : out;
    } catch (err) {
      if (err instanceof CommandExitError && err.exitCode !== 127) return undefined;
      throw err;
    }
  }

  /**
   * Runs a push or pull, with credentials put into the remote's URL for
   * that command only and taken out again whatever happens.
   */
  async #withRemote(
    action: 'push' | 'pull',
    path: string,
    remote: string | undefined,
    username: string | undefined,
    password: string | undefined,
    opts: GitRequestOpts,
    run: (remote: string | undefined) => Promise<CommandResult>,
  ): Promise<CommandResult> {
    if (password && !username) throw new InvalidArgumentError(`git ${action} with a password needs a username too`);
    const classify = (err: unknown): never => {
      if (err instanceof CommandExitError && NO_UPSTREAM.test(`${err.stderr}\n${err.stdout}`)) {
        throw new GitUpstreamError(upstreamMessage(action), { cause: err });
      }
      throw err;
    };
    if (!username || !password) return authFailures(action, () => run(remote)).catch(classify);
    const name = remote ?? (await this.#onlyRemote(path, opts));
    const url = await this.remoteGet(path, name, opts);
    if (url === undefined) throw new InvalidArgumentError(`the repository at '${path}' has no remote '${name}'`);
    await this.#git(['remote', 'set-url', name, withCredentials(url, username, password, action)], path, opts);
    try {
      return await authFailures(action, () => run(name)).catch(classify);
    } finally {
      await this.#git(['remote', 'set-url', name, url], path, opts);
    }
  }

  /** `origin`, or the one remote of a repository that has one under another name. */
  async #onlyRemote(path: string, opts: GitRequestOpts): Promise<string> {
    const remotes = (await this.#git(['remote'], path, opts)).stdout.split('\n').filter((r) => r.trim() !== '');
    if (remotes.includes('origin') || remotes.length !== 1) return 'origin';
    return remotes[0]!;
  }
}

/** An http(s) URL with the credentials in it; the URL itself when there are none. */
function withCredentials(url: string, username: string | undefined, password: string | undefined, action: string): string {
  if (password && !username) throw new InvalidArgumentError(`git ${action} with a password needs a username too`);
  if (!username || !password) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidArgumentError(`credentials work only with an http(s) URL; '${url}' is not one`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidArgumentError(`credentials work only with an http(s) URL; '${url}' is ${parsed.protocol}`);
  }
  parsed.username = username;
  parsed.password = password;
  return parsed.toString();
}

/** The directory `git clone` would make for a URL. */
function repositoryName(url: string): string {
  const last = url.replace(/[/\\]+$/, '').split(/[/:\\]/).pop() ?? '';
  const name = last.replace(/\.git$/, '');
  if (!name) throw new InvalidArgumentError(`cannot tell the repository's name from '${url}'; pass path`);
  return name;
}

function positive(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new InvalidArgumentError(`${name} must be a whole number of at least 1; got ${value}`);
  return value;
}

async function authFailures<T>(action: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof CommandExitError && AUTH_FAILURE.test(`${err.stderr}\n${err.stdout}`)) {
      throw new GitAuthError(`git ${action} was refused credentials, or needed some: ${err.stderr.trim()}`, { cause: err });
    }
    throw err;
  }
}

function upstreamMessage(action: 'push' | 'pull'): string {
  return action === 'push'
    ? 'git push has no upstream branch to push to: pass remote and branch, or push once with setUpstream'
    : 'git pull has no upstream branch to pull from: pass remote and branch, or push once with setUpstream';
}

function configScope(opts: GitConfigOpts): { scope: string; repo: string | undefined; rest: GitRequestOpts } {
  const { scope = 'global', path, ...rest } = opts;
  if (!CONFIG_SCOPES.includes(scope)) throw new InvalidArgumentError(`git config scope must be one of ${CONFIG_SCOPES.join(', ')}; got '${String(scope)}'`);
  if (scope === 'local' && !path) throw new InvalidArgumentError("git config scope 'local' needs the repository's path");
  return { scope: `--${scope}`, repo: scope === 'local' ? path : undefined, rest };
}

/** The label of a file from the two status columns, the most telling first. */
function label(index: string, worktree: string): GitStatusLabel {
  const both = index + worktree;
  if (both.includes('U') || both === 'AA' || both === 'DD') return 'conflict';
  for (const [letter, name] of [
    ['R', 'renamed'],
    ['C', 'copied'],
    ['D', 'deleted'],
    ['A', 'added'],
    ['M', 'modified'],
    ['T', 'typechange'],
    ['?', 'untracked'],
  ] as const) {
    if (both.includes(letter)) return name;
  }
  return 'unknown';
}

/** Reads `git status --porcelain=1 --branch`. */
export function parseStatus(output: string): GitStatus {
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  const status: GitStatus = {
    ahead: 0,
    behind: 0,
    detached: false,
    fileStatus: [],
    isClean: true,
    hasChanges: false,
    hasStaged: false,
    hasUntracked: false,
    hasConflicts: false,
    totalCount: 0,
    stagedCount: 0,
    unstagedCount: 0,
    untrackedCount: 0,
    conflictCount: 0,
  };
  for (const line of lines) {
    if (line.startsWith('## ')) {
      readBranchLine(line.slice(3), status);
      continue;
    }
    const index = line[0]!;
    const worktree = line[1]!;
    const path = line.slice(3);
    const arrow = path.indexOf(' -> ');
    const file: GitFileStatus = {
      name: arrow === -1 ? path : path.slice(arrow + 4),
      status: label(index, worktree),
      indexStatus: index,
      workingTreeStatus: worktree,
      staged: index !== ' ' && index !== '?',
    };
    if (arrow !== -1) file.renamedFrom = path.slice(0, arrow);
    status.fileStatus.push(file);
  }
  const files = status.fileStatus;
  status.totalCount = files.length;
  status.stagedCount = files.filter((f) => f.staged).length;
  status.unstagedCount = status.totalCount - status.stagedCount;
  status.untrackedCount = files.filter((f) => f.status === 'untracked').length;
  status.conflictCount = files.filter((f) => f.status === 'conflict').length;
  status.isClean = status.totalCount === 0;
  status.hasChanges = !status.isClean;
  status.hasStaged = status.stagedCount > 0;
  status.hasUntracked = status.untrackedCount > 0;
  status.hasConflicts = status.conflictCount > 0;
  return status;
}

/** `main...origin/main [ahead 1, behind 2]`, `No commits yet on main`, `HEAD (no branch)`. */
function readBranchLine(text: string, status: GitStatus): void {
  const bracket = /^(.*?)(?: \[(.*)\])?$/.exec(text)!;
  const head = bracket[1]!.replace(/^(No commits yet on |Initial commit on )/, '');
  const counts = bracket[2] ?? '';
  status.ahead = Number(/ahead (\d+)/.exec(counts)?.[1] ?? 0);
  status.behind = Number(/behind (\d+)/.exec(counts)?.[1] ?? 0);
  if (head.startsWith('HEAD (')) {
    status.detached = true;
    return;
  }
  const [branch, upstream] = head.split('...');
  if (branch) status.currentBranch = branch;
  if (upstream) status.upstream = upstream;
}
