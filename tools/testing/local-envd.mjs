// Starts the built envd as a real process on the host, the way a sandbox runs
// it but without a container: as root, on a TCP port, with its own
// passwd/group files whose users (`root`, and `user` with uid 1000) have their
// homes under a temporary directory. Used by envd's and the SDK's tests and by
// the envd benchmark, so that all of them start envd one way.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { envdMain, envdNodeFlags } from '@paddock/envd';

/** The built envd of this repository. */
export { envdMain };

export async function startLocalEnvd({ prefix = 'local-envd-', token, port = 0, extraArgs = [], main = envdMain } = {}) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // mkdtemp makes it 0700; the user must be able to reach its home.
  chmodSync(dir, 0o755);
  const home = { root: join(dir, 'home/root'), user: join(dir, 'home/user') };
  mkdirSync(home.root, { recursive: true });
  mkdirSync(home.user, { recursive: true });
  chownSync(home.user, 1000, 1000);
  mkdirSync(join(dir, 'work'));
  chmodSync(join(dir, 'work'), 0o777);
  writeFileSync(join(dir, 'passwd'), `root:x:0:0:root:${home.root}:/bin/bash\nuser:x:1000:1000::${home.user}:/bin/bash\n`);
  writeFileSync(join(dir, 'group'), 'root:x:0:\nuser:x:1000:\n');
  const args = [main, '--port', String(port), '--passwd-file', join(dir, 'passwd'), '--group-file', join(dir, 'group')];
  if (token) args.push('--access-token', token);
  // As in a sandbox, envd runs with its own node options only: with others
  // from NODE_OPTIONS, V8 would refuse the code cache its build made.
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [...envdNodeFlags, ...args, ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'], env });
  const logs = [];
  let listening;
  try {
    listening = await new Promise((resolve, reject) => {
      createInterface({ input: child.stderr }).on('line', (line) => {
        logs.push(line);
        try {
          const msg = JSON.parse(line);
          if (msg.msg === 'ready' && msg.port) resolve(msg.port);
        } catch {
          // not JSON: it stays in the log
        }
      });
      child.once('exit', (code) => reject(new Error(`envd exited with ${code} before it was ready:\n${logs.join('\n')}`)));
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: `http://127.0.0.1:${listening}`,
    port: listening,
    pid: child.pid,
    dir,
    home,
    token,
    logs,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        // A test that found envd misbehaving must not leave it running.
        const escalate = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(escalate);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
