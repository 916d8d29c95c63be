// Starts a real envd process (the built @paddock/envd) for a test, the way
// a sandbox runs it but on the host: as root, on a free TCP port, with its
// own passwd/group files whose users live under a temporary directory. The
// SDK reaches it through `sandboxUrl`, exactly as it reaches the shared
// sandbox proxy; envd ignores the routing headers.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Sandbox } from '../../src/index.js';

const envdMain = join(dirname(createRequire(import.meta.url).resolve('@paddock/envd/package.json')), 'dist/main.js');

export interface LocalEnvd {
  url: string;
  token: string;
  /** Temporary directory: homes under home/, scratch space under work/. */
  dir: string;
  home: { root: string; user: string };
  /** A Sandbox object for this envd, built without any control API. */
  sandbox(options?: { token?: string }): Sandbox;
  stop(): Promise<void>;
}

export async function startEnvd(): Promise<LocalEnvd> {
  const dir = mkdtempSync(join(tmpdir(), 'sdk-envd-'));
  chmodSync(dir, 0o755);
  const home = { root: join(dir, 'home/root'), user: join(dir, 'home/user') };
  mkdirSync(home.root, { recursive: true });
  mkdirSync(home.user, { recursive: true });
  chownSync(home.user, 1000, 1000);
  mkdirSync(join(dir, 'work'), { mode: 0o777 });
  chmodSync(join(dir, 'work'), 0o777);
  writeFileSync(join(dir, 'passwd'), `root:x:0:0:root:${home.root}:/bin/bash\nuser:x:1000:1000::${home.user}:/bin/bash\n`);
  writeFileSync(join(dir, 'group'), 'root:x:0:\nuser:x:1000:\n');
  const token = `tok-${process.pid}-${Date.now()}`;
  const child = spawn(
    process.execPath,
    [envdMain, '--port', '0', '--passwd-file', join(dir, 'passwd'), '--group-file', join(dir, 'group'), '--access-token', token],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const logs: string[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stderr }).on('line', (line) => {
      logs.push(line);
      try {
        const msg = JSON.parse(line) as { msg?: string; port?: number };
        if (msg.msg === 'ready' && msg.port) resolve(msg.port);
      } catch {
        // a line that is not JSON stays in the log
      }
    });
    child.once('exit', (code) => reject(new Error(`envd exited with ${code} before it was ready:\n${logs.join('\n')}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    token,
    dir,
    home,
    sandbox: (options = {}) =>
      Sandbox.fromConnectionInfo(
        { sandboxId: 'local-envd', envdVersion: '0.7.0', envdAccessToken: options.token ?? token },
        { sandboxUrl: url, apiKey: 'unused-no-control-api-here' },
      ),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
