import { useState, type FormEvent } from 'react';
import { useSigned } from '../context.js';
import { errorText, time } from '../format.js';
import { usePoll } from '../use-poll.js';

/** The keys of the server as the control API lists them; create and delete. */
export function ApiKeysPage() {
  const { control, session } = useSigned();
  const keys = usePoll(() => control.listApiKeys(), 0, []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ name: string; key: string }>();
  const [confirm, setConfirm] = useState<string>();
  const [error, setError] = useState<string>();

  const act = async (task: () => Promise<void>) => {
    setError(undefined);
    try {
      await task();
      keys.reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const create = (e: FormEvent) => {
    e.preventDefault();
    void act(async () => {
      const k = await control.createApiKey({ name: name.trim() });
      setCreated({ name: k.name, key: k.key });
      setName('');
    });
  };

  return (
    <section>
      <h1>API keys</h1>
      <form className="filters" onSubmit={create}>
        <input placeholder="name of a new key" value={name} onChange={(e) => setName(e.target.value)} required />
        <button type="submit" disabled={!name.trim()}>
          Create key
        </button>
      </form>
      {created && (
        <p className="note" data-testid="created-key">
          Key <strong>{created.name}</strong>, shown this once: <code>{created.key}</code>{' '}
          <button onClick={() => setCreated(undefined)}>Hide</button>
        </p>
      )}
      {(error ?? keys.error) && <p className="error">{error ?? keys.error}</p>}
      <table className="list" data-testid="api-keys">
        <thead>
          <tr>
            <th>Name</th>
            <th>Key</th>
            <th>Created</th>
            <th>Last used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.data?.map((k) => (
            <tr key={k.id}>
              <td>
                {k.name} {k.id === session.keyID && <span className="chip">this session</span>}
              </td>
              <td>
                <code>
                  {k.mask.maskedValuePrefix}…{k.mask.maskedValueSuffix}
                </code>
              </td>
              <td className="muted">{time(k.createdAt)}</td>
              <td className="muted">{k.lastUsed ? time(k.lastUsed) : 'never'}</td>
              <td>
                {confirm === k.id ? (
                  <button className="danger" onClick={() => act(async () => (await control.deleteApiKey(k.id), setConfirm(undefined)))}>
                    Really delete
                  </button>
                ) : (
                  <button className="danger" onClick={() => setConfirm(k.id)}>
                    Delete
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
