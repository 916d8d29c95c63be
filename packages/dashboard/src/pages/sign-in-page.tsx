import { useState, type FormEvent } from 'react';
import { errorText } from '../format.js';
import { signIn, type SessionInfo } from '../session.js';

export function SignInPage({ onSignedIn }: { onSignedIn: (s: SessionInfo) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onSignedIn(await signIn(key.trim()));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    // method=post: were the script's handler ever skipped, the key would still not land in a URL.
    <form className="sign-in" method="post" onSubmit={submit}>
      <h1>Paddock</h1>
      <label>
        API key
        <input name="key" type="password" autoComplete="off" value={key} onChange={(e) => setKey(e.target.value)} required autoFocus />
      </label>
      <button type="submit" disabled={busy || !key.trim()}>
        Sign in
      </button>
      {error && <p className="error">{error}</p>}
      <p className="muted">The key is exchanged for a session cookie; the page never keeps it.</p>
    </form>
  );
}
