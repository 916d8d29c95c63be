import { useMemo } from 'react';
import { FileBrowser } from '../components/file-browser.js';
import { LifecycleLog } from '../components/lifecycle-log.js';
import { SandboxActions } from '../components/sandbox-actions.js';
import { SandboxMetrics } from '../components/sandbox-metrics.js';
import { TerminalView } from '../components/terminal-view.js';
import { useSigned } from '../context.js';
import { age, errorText, time, until } from '../format.js';
import { href, SANDBOX_TABS, type SandboxTab } from '../router.js';
import { sdkSandbox } from '../sdk-sandbox.js';
import { usePoll } from '../use-poll.js';

export function SandboxPage({ id, tab }: { id: string; tab: SandboxTab }) {
  const { control } = useSigned();
  const detail = usePoll(() => control.getSandbox(id), 5000, [id]);
  const d = detail.data;
  // One SDK object per sandbox and access token: a resume may hand out a new token.
  const made = useMemo(() => {
    if (!d || d.state !== 'running') return {};
    try {
      return { sandbox: sdkSandbox(d) };
    } catch (err) {
      // An envd too old for the SDK: the page still shows what the control API knows.
      return { error: errorText(err) };
    }
  }, [d?.sandboxID, d?.envdAccessToken, d?.state]);
  const sandbox = made.sandbox;
  const now = Date.now();

  return (
    <section>
      <p>
        <a href={href('sandboxes')}>← Sandboxes</a>
      </p>
      <h1>
        Sandbox <code>{id}</code> {d && <span className={`state ${d.state}`}>{d.state}</span>}
      </h1>
      {detail.error && <p className="error">{detail.error}</p>}
      {d && (
        <>
          <dl className="facts">
            <dt>Template</dt>
            <dd>{d.alias ?? d.templateID}</dd>
            <dt>Started</dt>
            <dd>
              {time(d.startedAt)} ({age(d.startedAt, now)} ago)
            </dd>
            <dt>Expires</dt>
            <dd data-testid="expires">
              {time(d.endAt)} ({until(d.endAt, now)})
            </dd>
            <dt>Resources</dt>
            <dd>
              {d.cpuCount} CPU · {d.memoryMB} MiB memory · {d.diskSizeMB} MiB disk
            </dd>
            <dt>Metadata</dt>
            <dd>
              {Object.entries(d.metadata ?? {}).map(([k, v]) => (
                <span key={k} className="chip">
                  {k}={v}
                </span>
              ))}
            </dd>
            <dt>envd</dt>
            <dd>{d.envdVersion}</dd>
          </dl>
          <SandboxActions detail={d} onChange={detail.reload} />
        </>
      )}
      <nav className="tabs">
        {SANDBOX_TABS.map((t) => (
          <a key={t} href={href('sandboxes', id, t)} className={t === tab ? 'current' : ''}>
            {t}
          </a>
        ))}
      </nav>
      {tab === 'metrics' && <SandboxMetrics id={id} />}
      {tab === 'logs' && <LifecycleLog id={id} />}
      {made.error && <p className="error">{made.error}</p>}
      {(tab === 'files' || tab === 'terminal') &&
        (sandbox ? (
          tab === 'files' ? (
            <FileBrowser sandbox={sandbox} />
          ) : (
            <TerminalView sandbox={sandbox} />
          )
        ) : (
          d && <p className="muted">The sandbox is {d.state}: resume it to reach its files and terminal.</p>
        ))}
    </section>
  );
}
