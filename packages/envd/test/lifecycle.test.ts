// envd as a process: how it behaves when what surrounds it goes away.
import { readFileSync } from 'node:fs';
import { processes, startEnvd } from './harness.js';

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

/**
 * Whether the process `pid`, started at `startTime` (clock ticks after boot,
 * from /proc/<pid>/stat), still runs. A zombie has ended: it only waits for
 * its parent to collect its exit status, and a process that ends after envd
 * is gone has the host's init as its parent, which collects it in its own
 * time. A different start time means the pid was reused.
 */
function stillRunning(pid: number, startTime: string): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.startTime === startTime && stat.state !== 'Z';
}

function procStat(pid: number): { state: string; startTime: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The fields after the command name, which is in parentheses: state is
  // the first of them (field 3 of stat), the start time the 20th (field 22).
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0]!, startTime: fields[19]! };
}

test('on SIGTERM envd ends the processes it started, piped or on a terminal, with their children', async () => {
  const envd = await startEnvd();
  const tracked: Array<{ what: string; pid: number; startTime: string }> = [];
  try {
    const client = processes(envd);
    const streams: Array<Promise<void>> = [];
    /** Starts a process and resolves with its pid and the first line of its output. */
    const start = (req: Parameters<typeof client.start>[0]) =>
      new Promise<{ pid: number; firstLine: string }>((resolve, reject) => {
        let pid = 0;
        let output = '';
        streams.push(
          (async () => {
            for await (const r of client.start(req)) {
              const ev = r.event?.event;
              if (ev?.case === 'start') pid = ev.value.pid;
              if (ev?.case === 'data') output += Buffer.from(ev.value.output.value ?? []).toString();
              if (pid && (req.pty || output.includes('\n'))) resolve({ pid, firstLine: output.split('\n')[0]! });
            }
          })().then(
            () => reject(new Error(`the process ended before it was seen running: ${JSON.stringify(output)}`)),
            // The stream breaks when envd goes away.
            () => reject(new Error(`the stream failed before the process was seen running`)),
          ),
        );
      });
    const track = (what: string, pid: number) => {
      const stat = procStat(pid);
      expect({ what, state: stat?.state }).toEqual({ what, state: expect.stringMatching(/^[RS]$/) });
      tracked.push({ what, pid, startTime: stat!.startTime });
    };

    // A shell that waits for a child it started in the background.
    const piped = await start({ process: { cmd: '/bin/bash', args: ['-c', 'sleep 1000 & echo $!; wait'] }, stdin: false });
    track('piped shell', piped.pid);
    track('child of the piped shell', Number(piped.firstLine));
    const pty = await start({ process: { cmd: 'sleep', args: ['1000'] }, pty: { size: { cols: 80, rows: 24 } } });
    track('process on a terminal', pty.pid);
    // One that ignores SIGTERM, as its child does: these need SIGKILL.
    const stubborn = await start({ process: { cmd: '/bin/bash', args: ['-c', "trap '' TERM; sleep 1000 & echo $!; wait"] }, stdin: false });
    track('shell ignoring SIGTERM', stubborn.pid);
    track('child ignoring SIGTERM', Number(stubborn.firstLine));

    const exited = new Promise<[number | null, string | null]>((resolve) => envd.child.once('exit', (code, signal) => resolve([code, signal])));
    envd.child.kill('SIGTERM');
    expect(await exited).toEqual([0, null]);
    await Promise.allSettled(streams);

    // envd SIGKILLs the stubborn ones just before it exits; give the kernel
    // a moment to finish them, then name any that are left.
    let left = tracked.filter((p) => stillRunning(p.pid, p.startTime));
    for (let i = 0; i < 100 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      left = left.filter((p) => stillRunning(p.pid, p.startTime));
    }
    expect(left.map((p) => `${p.what} (pid ${p.pid})`)).toEqual([]);
  } finally {
    // Whatever envd failed to end must not outlive the test.
    for (const p of tracked) if (stillRunning(p.pid, p.startTime)) process.kill(p.pid, 'SIGKILL');
    await envd.stop();
  }
}, 40_000);
