// The code interpreter (`--only code-interpreter`), as a user of the official
// @e2b/code-interpreter SDK runs it: runCode('1+1') on a running sandbox of
// code-interpreter-v1, next to the same cell executed by a Jupyter client
// on a local ipykernel of this host (Debian's, as in the template); and
// Sandbox.create() + the first runCode from the warm pool (whose sandboxes
// wait with the template's start command running and ready), next to
// starting a local kernel and executing its first cell.
//
// The template is built by `paddock template build` from its definition,
// on the data directory the tests keep for it (tools/testing/code-interpreter.mjs),
// so a machine that ran the compat suite builds nothing.
import { Sandbox } from '@e2b/code-interpreter';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { buildCodeInterpreter, CODE_INTERPRETER_API_KEY as KEY, codeInterpreterHome } from '../../testing/code-interpreter.mjs';
import { undoOnInterrupt } from '../interrupt.mjs';
import { closings, pair, row } from '../lib.mjs';
import { serverInHome } from '../processes.mjs';

// The baseline: a jupyter_client of the host's python3 driving a local
// ipykernel. `execute` runs 1+1 on the kernel it keeps; `cold` starts a new
// kernel, runs 1+1 on it and shuts it down. Each answers the ms it took, as
// measured there.
const BASELINE = `
import os, sys, time
from jupyter_client.manager import start_new_kernel
def run(kc):
    kc.execute_interactive("1+1", output_hook=lambda m: None, timeout=60)
km, kc = start_new_kernel(kernel_name="python3")
print("ready", flush=True)
for line in sys.stdin:
    t = time.perf_counter()
    if line.strip() == "execute":
        run(kc)
    else:
        km2, kc2 = start_new_kernel(kernel_name="python3")
        run(kc2)
        kc2.stop_channels(); km2.shutdown_kernel(now=True)
        t2 = time.perf_counter(); print((t2 - t) * 1000, flush=True); continue
    print((time.perf_counter() - t) * 1000, flush=True)
kc.stop_channels(); km.shutdown_kernel(now=True)
os._exit(0)  # no client destructors run at exit (they would log into a closed interpreter)
`;

async function localKernel() {
  const child = spawn('/usr/bin/python3', ['-c', BASELINE], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: '1' } });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('the local kernel client exited');
    return value;
  };
  if ((await next()) !== 'ready') throw new Error('the local kernel client did not start');
  const ask = (what) => async () => {
    child.stdin.write(`${what}\n`);
    return { ms: Number(await next()) };
  };
  return {
    execute: ask('execute'),
    cold: ask('cold'),
    close: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.stdin.end();
      }),
  };
}

export async function codeInterpreterSuite({ quick, log }) {
  const closing = closings();
  try {
    const { home } = codeInterpreterHome();
    const server = await serverInHome('paddock-bench-ci-', { warmPoolSize: 1, warmPoolTemplates: ['code-interpreter-v1'], initialApiKey: KEY, metricsIntervalMs: 60_000 }, { home });
    closing.add(server.close);
    Object.assign(process.env, { E2B_API_URL: server.apiUrl, E2B_SANDBOX_URL: server.proxyUrl, E2B_API_KEY: KEY });
    log('code-interpreter: building code-interpreter-v1 (the first time takes minutes)');
    const built = await buildCodeInterpreter({ apiUrl: server.apiUrl, apiKey: KEY });
    log(`code-interpreter: built in ${(built / 1000).toFixed(1)} s`);
    const local = await localKernel();
    closing.add(undoOnInterrupt(local.close));

    log("code-interpreter: runCode('1+1') against a local kernel's execute");
    const sbx = await Sandbox.create();
    closing.add(() => sbx.kill());
    const runCode = async () => {
      const t = performance.now();
      const execution = await sbx.runCode('1+1');
      if (execution.text !== '2') throw new Error(`runCode('1+1') answered ${JSON.stringify(execution.text)}`);
      return { ms: performance.now() - t };
    };
    const [roundTrip, localExecute] = await pair([runCode, local.execute], { warmup: 5, iterations: quick ? 20 : 100 });

    log('code-interpreter: Sandbox.create() + first runCode from the warm pool against starting a local kernel and its first execute');
    const createAndRun = async () => {
      await server.poolReady();
      const t = performance.now();
      const s = await Sandbox.create();
      const execution = await s.runCode('1+1');
      const ms = performance.now() - t;
      await s.kill();
      if (execution.text !== '2') throw new Error(`the first runCode answered ${JSON.stringify(execution.text)}`);
      return { ms };
    };
    const [create, localCold] = await pair([createAndRun, local.cold], { warmup: 1, iterations: quick ? 3 : 10 });

    return [
      row({ suite: 'code-interpreter', name: "runCode('1+1') on a running sandbox", unit: 'ms', value: roundTrip, baseline: localExecute, baselineName: "a local ipykernel's execute of 1+1 (jupyter_client on this host)", target: { on: 'ratio', op: '<=', value: 1.5 } }),
      row({ suite: 'code-interpreter', name: 'Sandbox.create() of code-interpreter-v1 + first runCode, warm pool', unit: 'ms', value: create, baseline: localCold, baselineName: 'starting a local ipykernel + its first execute' }),
    ];
  } finally {
    await closing.run();
  }
}
