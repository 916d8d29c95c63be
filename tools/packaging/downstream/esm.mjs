// Node ESM, as a downstream service writes it: `import` of the installed
// tarballs, against the server the check started (PADDOCK_* in the env).
import { CommandExitError, Sandbox } from '@paddock/sdk';
import { EnvdClient } from '@paddock/envd-client';
import { ControlClient } from '@paddock/control-client';
import { Filesystem } from '@paddock/models';
import { ENVD_PORT } from '@paddock/protocol';
import assert from 'node:assert/strict';

// The ES module builds, by the `node` conditions.
assert.match(import.meta.resolve('@paddock/sdk'), /\/dist\/index\.js$/);
assert.match(import.meta.resolve('@paddock/envd-client'), /\/dist\/index\.js$/);
assert.equal(typeof EnvdClient, 'function');
assert.equal(typeof ControlClient, 'function');
assert.equal(Filesystem.typeName, 'filesystem.Filesystem');
assert.equal(ENVD_PORT, 49983);

const sbx = await Sandbox.create({ timeoutMs: 120_000 });
try {
  const run = await sbx.commands.run('echo "$((6 * 7)) from esm"');
  assert.equal(run.stdout, '42 from esm\n');
  await sbx.files.write('/home/user/esm.txt', 'written from ESM');
  assert.equal(await sbx.files.read('/home/user/esm.txt'), 'written from ESM');
  await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3);
} finally {
  await sbx.kill();
}
console.log('esm ok');
