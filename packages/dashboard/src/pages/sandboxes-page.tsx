import type { ListSandboxesQuery, SandboxState } from '@paddock/control-client';
import { useState } from 'react';
import { useSigned } from '../context.js';
import { age, until } from '../format.js';
import { href } from '../router.js';
import { usePoll } from '../use-poll.js';

const STATES: SandboxState[] = ['running', 'paused'];
const PAGE_SIZES = [10, 25, 100];

/** `a=1, b=2` as a metadata filter; entries without `=` are left out. */
function parseMetadata(text: string): Record<string, string> | undefined {
  const pairs = text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.includes('='))
    .map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()] as const);
  return pairs.length ? Object.fromEntries(pairs) : undefined;
}

export function SandboxesPage() {
  const { control } = useSigned();
  const [states, setStates] = useState<SandboxState[]>(STATES);
  const [template, setTemplate] = useState('');
  const [metadata, setMetadata] = useState('');
  const [limit, setLimit] = useState(25);
  // Cursors of the pages seen so far: the last is the current page's.
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors[cursors.length - 1];
  const query: ListSandboxesQuery = { state: states, limit, ...(template.trim() ? { template: template.trim() } : {}) };
  const meta = parseMetadata(metadata);
  if (meta) query.metadata = meta;
  if (cursor) query.nextToken = cursor;
  const page = usePoll(() => control.listSandboxes(query), 3000, [JSON.stringify(query)]);
  const firstPage = () => setCursors([undefined]);
  const now = Date.now();

  return (
    <section>
      <h1>Sandboxes</h1>
      <div className="filters">
        {STATES.map((s) => (
          <label key={s}>
            <input
              type="checkbox"
              checked={states.includes(s)}
              onChange={(e) => {
                setStates(e.target.checked ? [...states, s] : states.filter((x) => x !== s));
                firstPage();
              }}
            />
            {s}
          </label>
        ))}
        <input placeholder="template" value={template} onChange={(e) => (setTemplate(e.target.value), firstPage())} />
        <input placeholder="metadata: key=value, …" value={metadata} onChange={(e) => (setMetadata(e.target.value), firstPage())} />
        <label>
          per page
          <select value={limit} onChange={(e) => (setLimit(Number(e.target.value)), firstPage())}>
            {PAGE_SIZES.map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
        </label>
      </div>
      {page.error && <p className="error">{page.error}</p>}
      <table className="list" data-testid="sandboxes">
        <thead>
          <tr>
            <th>Sandbox</th>
            <th>State</th>
            <th>Template</th>
            <th>Metadata</th>
            <th>Age</th>
            <th>Expires</th>
            <th>Resources</th>
          </tr>
        </thead>
        <tbody>
          {page.data?.items.map((s) => (
            <tr key={s.sandboxID} data-sandbox={s.sandboxID}>
              <td>
                <a href={href('sandboxes', s.sandboxID)}>
                  <code>{s.sandboxID}</code>
                </a>
              </td>
              <td>
                <span className={`state ${s.state}`}>{s.state}</span>
              </td>
              <td>{s.alias ?? s.templateID}</td>
              <td>
                {Object.entries(s.metadata ?? {}).map(([k, v]) => (
                  <span key={k} className="chip">
                    {k}={v}
                  </span>
                ))}
              </td>
              <td>{age(s.startedAt, now)}</td>
              <td>{until(s.endAt, now)}</td>
              <td className="muted">
                {s.cpuCount} CPU · {s.memoryMB} MiB · {s.diskSizeMB} MiB disk
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {page.data && page.data.items.length === 0 && <p className="muted">No sandboxes match.</p>}
      <div className="pager">
        <button disabled={cursors.length < 2} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous
        </button>
        <span className="muted">page {cursors.length}</span>
        <button disabled={!page.data?.nextToken} onClick={() => setCursors([...cursors, page.data?.nextToken])}>
          Next
        </button>
      </div>
    </section>
  );
}
