import type { BuildLogEntry, TemplateBuildStatus } from '@paddock/control-client';
import { useEffect, useState } from 'react';
import { useSigned } from '../context.js';
import { errorText, time } from '../format.js';

/** How often a build under way is asked for its new log lines, ms. */
const EVERY_MS = 1000;
/** Log lines asked for at once: the most the API gives. */
const PAGE = 100;

/** A build's log, followed live while the build runs: each round asks only for the lines after those shown. */
export function BuildLog({ templateId, buildId, onFinished }: { templateId: string; buildId: string; onFinished: () => void }) {
  const { control } = useSigned();
  const [entries, setEntries] = useState<BuildLogEntry[]>([]);
  const [status, setStatus] = useState<TemplateBuildStatus>();
  const [reason, setReason] = useState<string>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    let live = true;
    let offset = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try {
        const info = await control.getTemplateBuildStatus(templateId, buildId, { logsOffset: offset, limit: PAGE });
        if (!live) return;
        offset += info.logEntries.length;
        if (info.logEntries.length) setEntries((old) => [...old, ...info.logEntries]);
        setStatus(info.status);
        setReason(info.reason?.message);
        setError(undefined);
        // A finished build has no more lines; a full page means more are waiting.
        const more = info.logEntries.length === PAGE;
        const underWay = info.status === 'building' || info.status === 'waiting';
        if (underWay || more) timer = setTimeout(tick, more ? 0 : EVERY_MS);
        else onFinished();
      } catch (err) {
        if (!live) return;
        setError(errorText(err));
        timer = setTimeout(tick, EVERY_MS * 5);
      }
    };
    void tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [control, templateId, buildId, onFinished]);

  return (
    <div>
      <h2>
        Build <code>{buildId}</code> {status && <span className={`state ${status}`}>{status}</span>}
      </h2>
      {reason && <p className="error">{reason}</p>}
      {error && <p className="error">{error}</p>}
      <pre className="build-log" data-testid="build-log">
        {entries.map((e, i) => (
          <div key={i} className={`level ${e.level}`}>
            <span className="muted">{time(e.timestamp)}</span> {e.step ? <span className="chip">{e.step}</span> : null}
            {e.message}
          </div>
        ))}
      </pre>
    </div>
  );
}
