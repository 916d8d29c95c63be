import type { EntryInfo, Sandbox } from '@paddock/sdk';
import { useRef, useState, type FormEvent } from 'react';
import { bytes, errorText } from '../format.js';
import { usePoll } from '../use-poll.js';

const parentOf = (path: string) => path.replace(/\/[^/]+\/?$/, '') || '/';
const join = (dir: string, name: string) => `${dir.replace(/\/$/, '')}/${name}`;

/** Saves a Blob as a file the way a link with `download` does, from an object URL (never a URL with a token). */
function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** One directory of the sandbox at a time, through envd: open, download, upload. */
export function FileBrowser({ sandbox }: { sandbox: Sandbox }) {
  const [dir, setDir] = useState('/home/user');
  const [typed, setTyped] = useState(dir);
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<string>();
  const upload = useRef<HTMLInputElement>(null);
  const entries = usePoll(() => sandbox.files.list(dir), 0, [sandbox, dir]);

  const go = (path: string) => {
    setDir(path);
    setTyped(path);
  };
  const run = async (what: string, task: () => Promise<void>) => {
    setBusy(what);
    setError(undefined);
    try {
      await task();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(undefined);
    }
  };
  const download = (e: EntryInfo) => run(`downloading ${e.name}`, async () => save(await sandbox.files.read(e.path, { format: 'blob' }), e.name));
  const send = (files: FileList | null) =>
    run('uploading', async () => {
      for (const f of Array.from(files ?? [])) await sandbox.files.write(join(dir, f.name), f);
      if (upload.current) upload.current.value = '';
      entries.reload();
    });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    go(typed.trim() || '/');
  };
  const sorted = [...(entries.data ?? [])].sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1));

  return (
    <div>
      <form className="filters" onSubmit={submit}>
        <button type="button" onClick={() => go(parentOf(dir))} disabled={dir === '/'}>
          Up
        </button>
        <input className="path" value={typed} onChange={(e) => setTyped(e.target.value)} aria-label="directory" />
        <button type="submit">Open</button>
        <button type="button" onClick={entries.reload}>
          Refresh
        </button>
        <label className="upload">
          Upload
          <input ref={upload} type="file" multiple onChange={(e) => send(e.target.files)} />
        </label>
        {busy && <span className="muted">{busy}…</span>}
      </form>
      {(error ?? entries.error) && <p className="error">{error ?? entries.error}</p>}
      <table className="list" data-testid="files">
        <thead>
          <tr>
            <th>Name</th>
            <th>Size</th>
            <th>Permissions</th>
            <th>Owner</th>
            <th>Modified</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {sorted.map((e) => (
            <tr key={e.path} data-file={e.name}>
              <td>
                {e.type === 'dir' ? (
                  <button className="link" onClick={() => go(e.path)}>
                    {e.name}/
                  </button>
                ) : (
                  e.name
                )}
              </td>
              <td>{e.type === 'dir' ? '' : bytes(e.size)}</td>
              <td>
                <code>{e.permissions}</code>
              </td>
              <td>{e.owner}</td>
              <td className="muted">{e.modifiedTime?.toLocaleString()}</td>
              <td>
                {e.type === 'file' && (
                  <button disabled={Boolean(busy)} onClick={() => download(e)}>
                    Download
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
