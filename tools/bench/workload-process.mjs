// One SDK in a process of its own, running the comparison workload on
// request: create a sandbox, write and read back 1 MiB, run `echo`, kill.
// Each SDK gets its own process, as it would in a user's program. Sharing
// one process, each paid for the other's garbage: measured, 42 workloads of
// the e2b SDK alone set off 7 full collections and ours alone none, and with
// the two interleaved in one process the collections often landed in ours.
//
//   const sdk = await startWorkloadProcess('paddock', { apiUrl, apiKey, sandboxUrl });
//   const ms = await sdk.run(); ... await sdk.close();
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { answerCalls, callsTo } from './child-calls.mjs';
import { benchNodeFlags } from './lib.mjs';

const self = fileURLToPath(import.meta.url);
const MiB = 1024 * 1024;

/** Starts the process for `sdk` ('paddock' or 'e2b'); resolves once it is ready. */
export async function startWorkloadProcess(sdk, { apiUrl, apiKey, sandboxUrl }) {
  const env = { ...process.env, E2B_API_URL: apiUrl, E2B_SANDBOX_URL: sandboxUrl, E2B_API_KEY: apiKey };
  // The same node options for both SDKs (see benchNodeFlags).
  const child = fork(self, ['--workload', sdk, JSON.stringify({ apiUrl, apiKey, sandboxUrl })], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: benchNodeFlags });
  const { call, close } = await callsTo(child, `${sdk} workload`);
  return {
    /** Runs the workload once; resolves with its duration in ms. */
    run: () => call('run'),
    close,
  };
}

async function serve(sdk, opts) {
  const create =
    sdk === 'e2b'
      ? await import('e2b').then(({ Sandbox }) => () => Sandbox.create())
      : await import('@paddock/sdk').then(({ Sandbox }) => () => Sandbox.create(opts));
  const payload = randomBytes(MiB);
  answerCalls({
    async run() {
      const t = performance.now();
      const sbx = await create();
      await sbx.files.write('payload.bin', payload);
      const back = await sbx.files.read('payload.bin', { format: 'bytes' });
      if (back.length !== MiB) throw new Error(`read back ${back.length} bytes of ${MiB}`);
      await sbx.commands.run('echo hi');
      await sbx.kill();
      return performance.now() - t;
    },
    close() {},
  });
}

if (process.argv[1] === self && process.argv[2] === '--workload') await serve(process.argv[3], JSON.parse(process.argv[4]));
