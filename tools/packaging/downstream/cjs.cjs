// Node CommonJS: `require` of the installed tarballs, against the server
// the check started (PADDOCK_* in the env).
const assert = require('node:assert/strict');
const { CommandExitError, Sandbox } = require('@paddock/sdk');
const { EnvdClient } = require('@paddock/envd-client');
const { ControlClient } = require('@paddock/control-client');
const { Filesystem } = require('@paddock/models');
const { ENVD_PORT } = require('@paddock/protocol');

async function main() {
  // The CommonJS build itself, not Node's require() of the ES module build.
  assert.match(require.resolve('@paddock/sdk'), /[/\\]dist[/\\]cjs[/\\]index\.js$/);
  assert.equal(typeof EnvdClient, 'function');
  assert.equal(typeof ControlClient, 'function');
  assert.equal(Filesystem.typeName, 'filesystem.Filesystem');
  assert.equal(ENVD_PORT, 49983);

  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  try {
    const run = await sbx.commands.run('echo "$((6 * 7)) from cjs"');
    assert.equal(run.stdout, '42 from cjs\n');
    await sbx.files.write('/home/user/cjs.txt', 'written from CommonJS');
    assert.equal(await sbx.files.read('/home/user/cjs.txt'), 'written from CommonJS');
    await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3);
  } finally {
    await sbx.kill();
  }
  console.log('cjs ok');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
