import { useSigned } from '../context.js';
import { time } from '../format.js';
import { href } from '../router.js';
import { usePoll } from '../use-poll.js';

export function TemplatesPage() {
  const { control } = useSigned();
  const templates = usePoll(() => control.listTemplates(), 5000, []);
  return (
    <section>
      <h1>Templates</h1>
      {templates.error && <p className="error">{templates.error}</p>}
      <table className="list" data-testid="templates">
        <thead>
          <tr>
            <th>Template</th>
            <th>Names</th>
            <th>Last build</th>
            <th>Builds</th>
            <th>Resources</th>
            <th>Sandboxes started</th>
            <th>Updated</th>
          </tr>
        </thead>
        <tbody>
          {templates.data?.map((t) => (
            <tr key={t.templateID}>
              <td>
                <a href={href('templates', t.templateID)}>
                  <code>{t.templateID}</code>
                </a>
              </td>
              <td>{t.names.join(', ')}</td>
              <td>
                <span className={`state ${t.buildStatus}`}>{t.buildStatus}</span>
              </td>
              <td>{t.buildCount}</td>
              <td className="muted">
                {t.cpuCount} CPU · {t.memoryMB} MiB · {t.diskSizeMB} MiB disk
              </td>
              <td>{t.spawnCount}</td>
              <td className="muted">{time(t.updatedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
