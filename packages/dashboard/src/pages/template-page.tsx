import { useSigned } from '../context.js';
import { time } from '../format.js';
import { href } from '../router.js';
import { usePoll } from '../use-poll.js';
import { BuildLog } from '../components/build-log.js';

export function TemplatePage({ id, buildId }: { id: string; buildId: string | undefined }) {
  const { control } = useSigned();
  const page = usePoll(() => control.getTemplate(id, { limit: 50 }), 5000, [id]);
  const t = page.data?.template;
  return (
    <section>
      <p>
        <a href={href('templates')}>← Templates</a>
      </p>
      <h1>
        Template <code>{id}</code>
      </h1>
      {page.error && <p className="error">{page.error}</p>}
      {t && (
        <dl className="facts">
          <dt>Names</dt>
          <dd>{t.names.join(', ')}</dd>
          <dt>Public</dt>
          <dd>{t.public ? 'yes' : 'no'}</dd>
          <dt>Created</dt>
          <dd>{time(t.createdAt)}</dd>
          <dt>Sandboxes started</dt>
          <dd>{t.spawnCount}</dd>
        </dl>
      )}
      <h2>Builds</h2>
      <table className="list" data-testid="builds">
        <thead>
          <tr>
            <th>Build</th>
            <th>Status</th>
            <th>Started</th>
            <th>Finished</th>
            <th>Resources</th>
          </tr>
        </thead>
        <tbody>
          {t?.builds.map((b) => (
            <tr key={b.buildID} className={b.buildID === buildId ? 'selected' : ''}>
              <td>
                <a href={href('templates', id, b.buildID)}>
                  <code>{b.buildID}</code>
                </a>
              </td>
              <td>
                <span className={`state ${b.status}`}>{b.status}</span>
              </td>
              <td className="muted">{time(b.createdAt)}</td>
              <td className="muted">{b.finishedAt ? time(b.finishedAt) : ''}</td>
              <td className="muted">
                {b.cpuCount} CPU · {b.memoryMB} MiB
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {buildId && <BuildLog key={buildId} templateId={id} buildId={buildId} onFinished={page.reload} />}
    </section>
  );
}
