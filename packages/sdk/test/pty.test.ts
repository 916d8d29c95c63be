// sandbox.pty against a real envd, through the SDK only.
import { CommandExitError, type Sandbox } from '../src/index.js';
import { startEnvdWithSandbox, type LocalEnvd } from './support/envd.js';

let envd: LocalEnvd;
let sbx: Sandbox;
beforeAll(async () => ({ envd, sbx } = await startEnvdWithSandbox()));
afterAll(() => envd.stop());

/** Collects what a terminal prints, as text. */
function screen(): { onData: (data: Uint8Array) => void; text: () => string; waitFor: (pattern: RegExp) => Promise<RegExpExecArray> } {
  const decoder = new TextDecoder();
  let text = '';
  return {
    onData: (data) => {
      text += decoder.decode(data, { stream: true });
    },
    text: () => text,
    async waitFor(pattern) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const match = pattern.exec(text);
        if (match) return match;
        if (Date.now() > deadline) throw new Error(`terminal never printed ${pattern}; it printed:\n${text}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

test('a login shell in a terminal: environment, resize seen by tput, kill', async () => {
  const out = screen();
  const terminal = await sbx.pty.create({ cols: 100, rows: 30, onData: out.onData, timeoutMs: 0 });
  expect(terminal.pid).toBeGreaterThan(0);

  await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo "term=$TERM lang=$LC_ALL" size=$(tput cols)x$(tput lines)\n'));
  await out.waitFor(/term=xterm-256color lang=C\.UTF-8 size=100x30/);

  await sbx.pty.resize(terminal.pid, { cols: 132, rows: 43 });
  await terminal.sendStdin('echo cols=$(tput cols) lines=$(tput lines)\n');
  await out.waitFor(/cols=132 lines=43/);

  expect(await sbx.pty.kill(terminal.pid)).toBe(true);
  await expect(terminal.wait()).rejects.toBeInstanceOf(CommandExitError);
  expect(await sbx.pty.kill(terminal.pid)).toBe(false);
});

test('connect re-attaches to a terminal; Ctrl-D from closeStdin ends the shell', async () => {
  const first = screen();
  const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: first.onData, envs: { GREETING: 'hi there' } });
  await terminal.sendStdin('echo "$GREETING"\n');
  await first.waitFor(/hi there\r?\n/);
  await terminal.disconnect();

  const second = screen();
  const again = await sbx.pty.connect(terminal.pid, { onData: second.onData });
  await sbx.pty.sendInput(terminal.pid, 'echo "back again"\n');
  await second.waitFor(/back again\r?\n/);

  await again.closeStdin();
  const result = await again.wait();
  expect(result.exitCode).toBe(0);
});
