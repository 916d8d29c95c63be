// The SDK's methods beyond files and commands, against a real Paddock server:
// snapshots, forks, writeFiles, git in the sandbox, one error class per
// condition whichever method meets it, the `proxy` option and `E2B` clients.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxy } from 'proxy';
import PaddockSandbox, {
  AuthenticationError,
  CommandExitError,
  ConnectionError,
  E2B,
  GitAuthError,
  GitUpstreamError,
  InvalidArgumentError,
  Sandbox,
  SandboxNotFoundError,
  Template,
  TemplateBase,
  type ConnectionOpts,
} from '../src/index.js';
import { eventually } from '../../../tools/testing/poll.mjs';
import { freePort } from '../../../tools/testing/ports.mjs';
import { realServer, type RealServer } from './support/real-server.js';

let real: RealServer;
let opts: ConnectionOpts;

beforeAll(async () => {
  real = await realServer('api');
  opts = real.opts;
}, 300_000);

afterAll(() => real.teardown());

test('the default export is Sandbox', () => {
  expect(PaddockSandbox).toBe(Sandbox);
});

test('snapshots: create (static and instance), list, start a sandbox from one, delete', async () => {
  const sbx = await Sandbox.create('base', opts);
  await sbx.files.write('snap/kept.txt', 'in the snapshot');
  const named = await sbx.createSnapshot({ name: 'sdk-snap' });
  expect(named.snapshotId).toEqual(expect.any(String));
  expect(named.names.some((n) => n.includes('sdk-snap'))).toBe(true);
  const unnamed = await Sandbox.createSnapshot(sbx.sandboxId, opts);
  expect(unnamed.snapshotId).not.toBe(named.snapshotId);

  const ofSandbox = (await Sandbox.listSnapshots({ ...opts, sandboxId: sbx.sandboxId }).nextItems()).map((s) => s.snapshotId).sort();
  expect(ofSandbox).toEqual([named.snapshotId, unnamed.snapshotId].sort());
  const viaInstance: string[] = [];
  for await (const s of sbx.listSnapshots({ limit: 1 })) viaInstance.push(s.snapshotId);
  expect(viaInstance.sort()).toEqual(ofSandbox);
  expect((await Sandbox.listSnapshots({ ...opts, name: 'sdk-snap' }).nextItems()).map((s) => s.snapshotId)).toEqual([named.snapshotId]);

  // Files written after the snapshot are not in it.
  await sbx.files.write('snap/later.txt', 'after');
  const fromSnapshot = await Sandbox.create(named.snapshotId, opts);
  expect(await fromSnapshot.files.read('snap/kept.txt')).toBe('in the snapshot');
  expect(await fromSnapshot.files.exists('snap/later.txt')).toBe(false);
  await fromSnapshot.kill();

  expect(await Sandbox.deleteSnapshot(unnamed.snapshotId, opts)).toBe(true);
  expect(await Sandbox.deleteSnapshot(unnamed.snapshotId, opts)).toBe(false);
  expect((await Sandbox.listSnapshots({ ...opts, sandboxId: sbx.sandboxId }).nextItems()).map((s) => s.snapshotId)).toEqual([named.snapshotId]);
  expect(await Sandbox.deleteSnapshot(named.snapshotId, opts)).toBe(true);
  await sbx.kill();
  await expect(Sandbox.createSnapshot(sbx.sandboxId, opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
}, 120_000);

test('fork: static and instance; each fork has the files and runs on its own', async () => {
  const sbx = await Sandbox.create('base', opts);
  await sbx.files.write('fork/origin.txt', 'from the original');
  const forks = await sbx.fork({ count: 2, timeoutMs: 120_000 });
  expect(forks).toHaveLength(2);
  const [a, b] = forks as Sandbox[];
  expect(a).toBeInstanceOf(Sandbox);
  expect(b).toBeInstanceOf(Sandbox);
  expect(new Set([sbx.sandboxId, a!.sandboxId, b!.sandboxId]).size).toBe(3);
  expect(await a!.files.read('fork/origin.txt')).toBe('from the original');
  await a!.files.write('fork/only-a.txt', 'a');
  expect(await b!.files.exists('fork/only-a.txt')).toBe(false);
  expect(await sbx.files.exists('fork/only-a.txt')).toBe(false);
  const endAt = (await a!.getInfo()).endAt.getTime();
  expect(endAt - Date.now()).toBeLessThanOrEqual(121_000);

  const [c] = await Sandbox.fork(sbx.sandboxId, opts);
  expect(c).toBeInstanceOf(Sandbox);
  expect((await (c as Sandbox).commands.run('cat fork/origin.txt')).stdout).toBe('from the original');
  for (const s of [sbx, a!, b!, c as Sandbox]) await s.kill();
  await expect(Sandbox.fork(sbx.sandboxId, opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
}, 120_000);

test("e2b's deprecated names: getFullInfo is getInfo, betaPause is pause", async () => {
  const sbx = await Sandbox.create('base', opts);
  expect(await Sandbox.getFullInfo(sbx.sandboxId, opts)).toEqual(await Sandbox.getInfo(sbx.sandboxId, opts));
  expect(await sbx.betaPause()).toBe(true);
  expect((await sbx.getInfo()).state).toBe('paused');
  expect(await Sandbox.betaPause(sbx.sandboxId, opts)).toBe(false);
  await sbx.kill();
});

test('files.writeFiles writes every file and reports each', async () => {
  const sbx = await Sandbox.create('base', opts);
  const written = await sbx.files.writeFiles([
    { path: 'many/one.txt', data: 'one' },
    { path: '/tmp/many/two.bin', data: new Uint8Array([2, 2]) },
  ]);
  expect(written.map((w) => w.path)).toEqual(['/home/user/many/one.txt', '/tmp/many/two.bin']);
  expect(await sbx.files.read('many/one.txt')).toBe('one');
  expect([...(await sbx.files.read('/tmp/many/two.bin', { format: 'bytes' }))]).toEqual([2, 2]);
  expect(await sbx.files.writeFiles([])).toEqual([]);
  await sbx.kill();
});

describe('git', () => {
  let sbx: Sandbox;
  beforeAll(async () => {
    sbx = await Sandbox.create('base', { ...opts, timeoutMs: 600_000 });
  });
  afterAll(async () => {
    await sbx.kill();
  });

  test('init, configureUser, add, commit, status, branches', async () => {
    await sbx.git.init('repo', { initialBranch: 'main' });
    await sbx.git.configureUser('Sandbox User', 'user@example.com');
    expect(await sbx.git.getConfig('user.email')).toBe('user@example.com');
    await sbx.files.write('repo/a.txt', 'one\n');
    let status = await sbx.git.status('repo');
    expect(status).toMatchObject({ currentBranch: 'main', isClean: false, hasUntracked: true, untrackedCount: 1, stagedCount: 0 });
    expect(status.fileStatus).toEqual([{ name: 'a.txt', status: 'untracked', indexStatus: '?', workingTreeStatus: '?', staged: false }]);
    await sbx.git.add('repo');
    status = await sbx.git.status('repo');
    expect(status.fileStatus).toEqual([{ name: 'a.txt', status: 'added', indexStatus: 'A', workingTreeStatus: ' ', staged: true }]);
    await sbx.git.commit('repo', 'first', { authorName: 'Someone Else', authorEmail: 'else@example.com' });
    expect((await sbx.commands.run('git -C repo log -1 --format="%an <%ae> %s"')).stdout).toBe('Someone Else <else@example.com> first\n');
    expect(await sbx.git.status('repo')).toMatchObject({ isClean: true, totalCount: 0, ahead: 0, behind: 0, detached: false });

    await sbx.git.createBranch('repo', 'feature');
    expect(await sbx.git.branches('repo')).toEqual({ branches: ['feature', 'main'], currentBranch: 'feature' });
    await sbx.git.checkoutBranch('repo', 'main');
    await sbx.git.deleteBranch('repo', 'feature');
    expect(await sbx.git.branches('repo')).toEqual({ branches: ['main'], currentBranch: 'main' });
    await sbx.git.commit('repo', 'empty', { allowEmpty: true });
    await expect(sbx.git.commit('repo', 'nothing')).rejects.toBeInstanceOf(CommandExitError);
  });

  test('config scopes; reset and restore', async () => {
    await sbx.git.setConfig('pull.rebase', 'false', { scope: 'local', path: 'repo' });
    expect(await sbx.git.getConfig('pull.rebase', { scope: 'local', path: 'repo' })).toBe('false');
    expect(await sbx.git.getConfig('pull.rebase')).toBeUndefined();
    await expect(sbx.git.getConfig('x', { scope: 'local' })).rejects.toThrow(new InvalidArgumentError("git config scope 'local' needs the repository's path"));

    await sbx.files.write('repo/a.txt', 'changed\n');
    await sbx.git.restore('repo', { paths: ['a.txt'] });
    expect(await sbx.files.read('repo/a.txt')).toBe('one\n');
    await sbx.files.write('repo/a.txt', 'staged\n');
    await sbx.git.add('repo', { files: ['a.txt'] });
    await sbx.git.restore('repo', { paths: ['a.txt'], staged: true });
    expect((await sbx.git.status('repo')).fileStatus).toEqual([{ name: 'a.txt', status: 'modified', indexStatus: ' ', workingTreeStatus: 'M', staged: false }]);
    await sbx.git.add('repo');
    await sbx.git.reset('repo', { mode: 'hard' });
    expect(await sbx.files.read('repo/a.txt')).toBe('one\n');
    await expect(sbx.git.reset('repo', { mode: 'sideways' as never })).rejects.toThrow(/reset mode must be one of soft, mixed, hard, merge, keep/);
  });

  test('remotes, push with upstream, pull, and the upstream errors', async () => {
    await sbx.git.init('/home/user/origin.git', { bare: true, initialBranch: 'main' });
    await sbx.git.remoteAdd('repo', 'origin', '/nowhere.git');
    await sbx.git.remoteAdd('repo', 'origin', '/home/user/origin.git', { overwrite: true, fetch: true });
    expect(await sbx.git.remoteGet('repo', 'origin')).toBe('/home/user/origin.git');
    expect(await sbx.git.remoteGet('repo', 'none')).toBeUndefined();

    await sbx.git.createBranch('repo', 'loose');
    await expect(sbx.git.push('repo', { setUpstream: false })).rejects.toBeInstanceOf(GitUpstreamError);
    await expect(sbx.git.pull('repo')).rejects.toBeInstanceOf(GitUpstreamError);
    await sbx.git.checkoutBranch('repo', 'main');

    await sbx.git.push('repo', { remote: 'origin', branch: 'main' });
    expect(await sbx.git.status('repo')).toMatchObject({ currentBranch: 'main', upstream: 'origin/main', ahead: 0 });

    await sbx.git.clone('/home/user/origin.git', { path: 'other' });
    await sbx.files.write('other/b.txt', 'from other\n');
    await sbx.git.add('other');
    await sbx.git.commit('other', 'from other');
    expect(await sbx.git.status('other')).toMatchObject({ ahead: 1, upstream: 'origin/main' });
    await sbx.git.push('other');
    await sbx.git.pull('repo');
    expect(await sbx.files.read('repo/b.txt')).toBe('from other\n');
  });

  test('over http with basic auth: GitAuthError without credentials; with them, kept out of the remote URL unless asked', async () => {
    await sbx.commands.run(
      'mkdir -p served && git clone --bare origin.git served/repo.git && git -C served/repo.git update-server-info',
    );
    await sbx.files.write(
      'auth-server.py',
      [
        'import base64, functools, http.server',
        "GOOD = 'Basic ' + base64.b64encode(b'alice:s3cret').decode()",
        'class Handler(http.server.SimpleHTTPRequestHandler):',
        '    def do_GET(self):',
        "        if self.headers.get('Authorization') != GOOD:",
        '            self.send_response(401)',
        "            self.send_header('WWW-Authenticate', 'Basic realm=\"git\"')",
        '            self.end_headers()',
        '            return',
        '        super().do_GET()',
        "http.server.ThreadingHTTPServer(('127.0.0.1', 8123), functools.partial(Handler, directory='/home/user/served')).serve_forever()",
        '',
      ].join('\n'),
    );
    const httpServer = await sbx.commands.run('python3 auth-server.py', { background: true });
    const url = 'http://127.0.0.1:8123/repo.git';
    await eventually(async () => (await sbx.commands.run(`curl -s -o /dev/null -w '%{http_code}' ${url}/HEAD || true`)).stdout === '401', 'the git server');

    await expect(sbx.git.clone(url, { path: 'no-auth' })).rejects.toBeInstanceOf(GitAuthError);
    await expect(sbx.git.clone(url, { path: 'wrong', username: 'alice', password: 'nope' })).rejects.toBeInstanceOf(GitAuthError);
    await sbx.git.clone(url, { path: 'with-auth', username: 'alice', password: 's3cret' });
    expect(await sbx.files.read('with-auth/b.txt')).toBe('from other\n');
    expect(await sbx.git.remoteGet('with-auth', 'origin')).toBe(url);
    await sbx.git.clone(url, { path: 'stored', username: 'alice', password: 's3cret', dangerouslyStoreCredentials: true });
    expect(await sbx.git.remoteGet('stored', 'origin')).toBe('http://alice:s3cret@127.0.0.1:8123/repo.git');

    // A new commit upstream; pull with credentials, which leave the URL as it was.
    await sbx.files.write('repo/c.txt', 'third\n');
    await sbx.git.add('repo');
    await sbx.git.commit('repo', 'third');
    await sbx.git.push('repo');
    await sbx.commands.run('git -C served/repo.git fetch /home/user/origin.git main:main && git -C served/repo.git update-server-info');
    await expect(sbx.git.pull('with-auth')).rejects.toBeInstanceOf(GitAuthError);
    await sbx.git.pull('with-auth', { username: 'alice', password: 's3cret' });
    expect(await sbx.files.read('with-auth/c.txt')).toBe('third\n');
    expect(await sbx.git.remoteGet('with-auth', 'origin')).toBe(url);

    await sbx.git.dangerouslyAuthenticate({ username: 'alice', password: 's3cret', host: '127.0.0.1:8123', protocol: 'http' });
    await sbx.git.clone(url, { path: 'helper' });
    expect(await sbx.files.read('helper/c.txt')).toBe('third\n');
    await expect(sbx.git.clone(url, { password: 'only' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await httpServer.kill();
  });
});

describe('one error class per condition', () => {
  test('after kill, every method that reaches the sandbox throws SandboxNotFoundError', async () => {
    const sbx = await Sandbox.create('base', opts);
    expect(await sbx.kill()).toBe(true);
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['commands.run', () => sbx.commands.run('true')],
      ['commands.list', () => sbx.commands.list()],
      ['files.list', () => sbx.files.list('/')],
      ['files.read', () => sbx.files.read('/etc/hostname')],
      ['files.write', () => sbx.files.write('x.txt', 'x')],
      ['files.exists', () => sbx.files.exists('/etc/hostname')],
      ['files.watchDir', () => sbx.files.watchDir('/tmp', () => undefined)],
      ['pty.create', () => sbx.pty.create({ cols: 80, rows: 24, onData: () => undefined })],
      ['git.status', () => sbx.git.status('/')],
      ['getInfo', () => sbx.getInfo()],
      ['setTimeout', () => sbx.setTimeout(1000)],
    ];
    for (const [name, call] of calls) {
      const err = await call().catch((e: unknown) => e);
      expect([name, err]).toEqual([name, expect.any(SandboxNotFoundError)]);
    }
    expect(await sbx.isRunning()).toBe(false);
  });

  test('a control API or proxy that cannot be reached is a ConnectionError, not a missing sandbox', async () => {
    // A port on loopback that nothing listens on.
    const port = await freePort();
    const down = `http://127.0.0.1:${port}`;
    const create = await Sandbox.create('base', { ...opts, apiUrl: down, retries: 0 }).catch((e: unknown) => e);
    expect(create).toBeInstanceOf(ConnectionError);
    expect((create as Error).message).toMatch(/^cannot reach the control API: .*ECONNREFUSED/);
    await expect(Sandbox.list({ ...opts, apiUrl: down, retries: 0 }).nextItems()).rejects.toBeInstanceOf(ConnectionError);

    const sbx = await Sandbox.create('base', opts);
    const cut = Sandbox.fromConnectionInfo(sbx.connectionInfo, { ...opts, sandboxUrl: down });
    for (const call of [() => cut.files.list('/'), () => cut.files.read('/etc/hostname'), () => cut.commands.run('true')]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectionError);
      expect((err as Error).message).toMatch(/^cannot reach the sandbox: /);
    }
    // The sandbox itself is fine.
    expect((await sbx.commands.run('echo still here')).stdout).toBe('still here\n');
    await sbx.kill();
  });

  test('timeoutMs: -5 is refused by the SDK, not sent', async () => {
    const err = await Sandbox.create('base', { ...opts, timeoutMs: -5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as Error).message).toBe('timeoutMs must be a whole number of milliseconds, 0 or more; got -5');
  });
});

describe('the proxy option and E2B clients', () => {
  test('with `proxy`, every request goes through it: control calls, envd routes, Connect streams; a refused or missing proxy is an error', async () => {
    const tunnels: string[] = [];
    const proxyServer = createProxy(createServer());
    const credentials = `Basic ${Buffer.from('sdk:secret').toString('base64')}`;
    proxyServer.authenticate = (req: IncomingMessage) => req.headers['proxy-authorization'] === credentials;
    // Only tunnels that the proxy let through (the listener of the library runs first and checks the credentials).
    proxyServer.on('connect', (req: IncomingMessage) => {
      if (req.headers['proxy-authorization'] === credentials) tunnels.push(req.url!);
    });
    await new Promise<void>((done) => proxyServer.listen(0, '127.0.0.1', done));
    const proxy = `http://sdk:secret@127.0.0.1:${(proxyServer.address() as AddressInfo).port}`;
    try {
      const client = new E2B({ ...opts, proxy });
      const sbx = await client.Sandbox.create('base');
      expect(sbx).toBeInstanceOf(client.Sandbox);
      expect(sbx).toBeInstanceOf(Sandbox);
      const out: string[] = [];
      const run = await sbx.commands.run('for i in 1 2 3; do echo line $i; done', { onStdout: (s) => out.push(s) });
      expect(run.stdout).toBe('line 1\nline 2\nline 3\n');
      expect(out.join('')).toBe(run.stdout);
      await sbx.files.write('via-proxy.txt', 'through the proxy');
      expect(await sbx.files.read('via-proxy.txt')).toBe('through the proxy');
      expect((await sbx.files.list('.')).map((e) => e.name)).toContain('via-proxy.txt');
      expect((await client.Sandbox.getInfo(sbx.sandboxId)).sandboxId).toBe(sbx.sandboxId);
      await sbx.kill();
      // Nothing went around it: both the control API and the sandbox proxy were reached through tunnels.
      expect([...new Set(tunnels)].sort()).toEqual([new URL(opts.apiUrl!).host, new URL(opts.sandboxUrl!).host].sort());

      const refused = new E2B({ ...opts, proxy: proxy.replace('secret', 'wrong'), retries: 0 });
      await expect(refused.Sandbox.list().nextItems()).rejects.toBeInstanceOf(ConnectionError);
    } finally {
      proxyServer.close();
    }
    const nowhere = new E2B({ ...opts, proxy: `http://127.0.0.1:${await freePort()}`, retries: 0 });
    await expect(nowhere.Sandbox.list().nextItems()).rejects.toBeInstanceOf(ConnectionError);
    expect(() => new E2B({ proxy: 'socks5://127.0.0.1:1080' })).toThrow(new InvalidArgumentError("proxy must be an http:// or https:// URL; got 'socks5://127.0.0.1:1080'"));
  }, 120_000);

  test("a client's options are its calls' defaults, a call's own win, and they stay in that client", async () => {
    expect(process.env.PADDOCK_API_KEY).toBeUndefined();
    const client = new E2B(opts);
    const wrongKey = new E2B({ ...opts, apiKey: `e2b_${'0'.repeat(40)}` });
    expect(await client.Template.exists('base')).toBe(true);
    // An option given as undefined falls back to the client's, not to the environment.
    expect(await client.Template.exists('base', { apiKey: undefined })).toBe(true);
    expect(await client.Template.aliasExists('sdk-no-such-template')).toBe(false);
    expect(client.Template()).toBeInstanceOf(TemplateBase);
    await expect(wrongKey.Template.exists('base')).rejects.toBeInstanceOf(AuthenticationError);
    await expect(wrongKey.Sandbox.list().nextItems()).rejects.toBeInstanceOf(AuthenticationError);
    expect(Array.isArray(await wrongKey.Sandbox.list({ apiKey: opts.apiKey }).nextItems())).toBe(true);
    // The top-level classes have nothing bound.
    await expect(Template.exists('base', { apiUrl: opts.apiUrl })).rejects.toThrow(new AuthenticationError('an API key is required: pass `apiKey` or set PADDOCK_API_KEY'));
    expect(() => Sandbox.list({ apiUrl: opts.apiUrl })).toThrow(AuthenticationError);
    // Instance methods keep the client's options: a fork is of the client's class too.
    const sbx = await client.Sandbox.create('base');
    const [fork] = await sbx.fork();
    expect(fork).toBeInstanceOf(client.Sandbox);
    await (fork as Sandbox).kill();
    await sbx.kill();
  }, 120_000);
});
