// envd as a process: how it behaves when what surrounds it goes away.
import { startEnvd } from './harness.js';

test('with nobody reading its stderr any more, envd still serves and shuts down on SIGTERM', async () => {
  const envd = await startEnvd();
  try {
    envd.child.stderr!.destroy();
    const health = await fetch(`${envd.url}/health`);
    expect(health.status).toBe(204);
    // Shutting down logs a line to the broken pipe; envd used to spin on the
    // resulting write error instead of exiting. Give it ample time, then say
    // plainly that it did not exit rather than hang the suite.
    const exited = new Promise<[number | null, string | null] | 'still running'>((resolve) => {
      const timer = setTimeout(() => resolve('still running'), 15_000);
      envd.child.once('exit', (code, signal) => {
        clearTimeout(timer);
        resolve([code, signal]);
      });
    });
    envd.child.kill('SIGTERM');
    expect(await exited).toEqual([0, null]);
  } finally {
    await envd.stop();
  }
}, 40_000);
