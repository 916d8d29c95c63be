import type { SandboxDetail } from '@paddock/control-client';
import { useState } from 'react';
import { useSigned } from '../context.js';
import { errorText } from '../format.js';
import { href } from '../router.js';

/** Pause, resume, extend, snapshot and kill, through the control API. */
export function SandboxActions({ detail, onChange }: { detail: SandboxDetail; onChange: () => void }) {
  const { control } = useSigned();
  const id = detail.sandboxID;
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<string>();
  const [error, setError] = useState<string>();
  const [minutes, setMinutes] = useState(10);
  const [snapshotName, setSnapshotName] = useState('');
  const [confirmKill, setConfirmKill] = useState(false);

  const act = async (what: () => Promise<string | undefined>) => {
    setBusy(true);
    setError(undefined);
    setNote(undefined);
    try {
      setNote(await what());
      onChange();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const running = detail.state === 'running';

  return (
    <div className="actions">
      {running ? (
        <button disabled={busy} onClick={() => act(async () => (await control.pauseSandbox(id), 'paused'))}>
          Pause
        </button>
      ) : (
        <button disabled={busy} onClick={() => act(async () => (await control.connectSandbox(id, {}), 'resumed'))}>
          Resume
        </button>
      )}
      <span className="group">
        <input type="number" min={1} value={minutes} onChange={(e) => setMinutes(Number(e.target.value))} aria-label="minutes" />
        <button disabled={busy || !running || !(minutes > 0)} onClick={() => act(async () => (await control.setTimeout(id, { timeout: Math.round(minutes * 60) }), `expires in ${minutes} min`))}>
          Set expiry (min from now)
        </button>
      </span>
      <span className="group">
        <input placeholder="snapshot name (optional)" value={snapshotName} onChange={(e) => setSnapshotName(e.target.value)} />
        <button
          disabled={busy}
          onClick={() =>
            act(async () => {
              const snap = await control.createSnapshot(id, snapshotName.trim() ? { name: snapshotName.trim() } : {});
              return `snapshot ${snap.snapshotID}`;
            })
          }
        >
          Snapshot
        </button>
      </span>
      {confirmKill ? (
        <button
          className="danger"
          disabled={busy}
          onClick={() =>
            act(async () => {
              await control.killSandbox(id);
              window.location.hash = href('sandboxes');
              return undefined;
            })
          }
        >
          Really kill {id}
        </button>
      ) : (
        <button className="danger" disabled={busy} onClick={() => setConfirmKill(true)}>
          Kill
        </button>
      )}
      {note && <span className="note">{note}</span>}
      {error && <span className="error">{error}</span>}
    </div>
  );
}
