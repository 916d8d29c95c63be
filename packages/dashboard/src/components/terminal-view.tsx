import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import type { CommandHandle, Sandbox } from '@paddock/sdk';
import { useEffect, useRef, useState } from 'react';
import { errorText } from '../format.js';

/** A login shell in the sandbox: xterm.js over envd's PTY API, through the SDK. */
export function TerminalView({ sandbox }: { sandbox: Sandbox }) {
  const box = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting');

  useEffect(() => {
    const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    fit.fit();
    let closed = false;
    let handle: CommandHandle | undefined;
    const subscriptions: { dispose(): void }[] = [];
    void (async () => {
      try {
        handle = await sandbox.pty.create({
          cols: term.cols,
          rows: term.rows,
          onData: (bytes) => term.write(bytes),
          // The terminal lives as long as the page shows it.
          timeoutMs: 0,
          requestTimeoutMs: 0,
        });
        if (closed) {
          await handle.kill();
          return;
        }
        const pid = handle.pid;
        setStatus('connected');
        term.focus();
        // Keystrokes go one request at a time, in order; those typed meanwhile go together in the next.
        let pending = '';
        let sending = false;
        const flush = async () => {
          sending = true;
          while (pending && !closed) {
            const text = pending;
            pending = '';
            await sandbox.pty.sendInput(pid, text).catch((err) => setStatus(`input failed: ${errorText(err)}`));
          }
          sending = false;
        };
        subscriptions.push(
          term.onData((text) => {
            pending += text;
            if (!sending) void flush();
          }),
          term.onResize(({ cols, rows }) => void sandbox.pty.resize(pid, { cols, rows }).catch(() => undefined)),
        );
        const end = await handle.wait().then(
          (r) => `ended (exit ${r.exitCode})`,
          (err) => `ended: ${errorText(err)}`,
        );
        if (!closed) setStatus(end);
      } catch (err) {
        if (!closed) setStatus(`failed: ${errorText(err)}`);
      }
    })();
    const onWindowResize = () => fit.fit();
    window.addEventListener('resize', onWindowResize);
    return () => {
      closed = true;
      window.removeEventListener('resize', onWindowResize);
      for (const s of subscriptions) s.dispose();
      void handle?.kill().catch(() => undefined);
      term.dispose();
    };
  }, [sandbox]);

  return (
    <div>
      <p className="muted" data-testid="terminal-status">
        {status}
      </p>
      <div className="terminal-box" ref={box} data-testid="terminal" />
    </div>
  );
}
