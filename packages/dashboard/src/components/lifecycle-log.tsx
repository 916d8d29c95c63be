import type { LogLevel } from '@paddock/control-client';
import { useState } from 'react';
import { useSigned } from '../context.js';
import { time } from '../format.js';
import { usePoll } from '../use-poll.js';

const LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** The sandbox's lifecycle events, newest first. */
export function LifecycleLog({ id }: { id: string }) {
  const { control } = useSigned();
  const [level, setLevel] = useState<LogLevel>('debug');
  const [search, setSearch] = useState('');
  const logs = usePoll(
    () => control.getSandboxLogs(id, { direction: 'backward', limit: 500, level, ...(search.trim() ? { search: search.trim() } : {}) }),
    5000,
    [id, level, search],
  );
  return (
    <div>
      <div className="filters">
        <label>
          at least
          <select value={level} onChange={(e) => setLevel(e.target.value as LogLevel)}>
            {LEVELS.map((l) => (
              <option key={l}>{l}</option>
            ))}
          </select>
        </label>
        <input placeholder="containing" value={search} onChange={(e) => setSearch(e.target.value)} />
      </div>
      {logs.error && <p className="error">{logs.error}</p>}
      <table className="list log" data-testid="lifecycle-log">
        <tbody>
          {logs.data?.logs.map((l, i) => (
            <tr key={`${l.timestamp}-${i}`}>
              <td className="muted nowrap">{time(l.timestamp)}</td>
              <td className={`level ${l.level}`}>{l.level}</td>
              <td>
                {l.message}{' '}
                {Object.entries(l.fields ?? {}).map(([k, v]) => (
                  <span key={k} className="chip">
                    {k}={v}
                  </span>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {logs.data && logs.data.logs.length === 0 && <p className="muted">Nothing logged.</p>}
    </div>
  );
}
