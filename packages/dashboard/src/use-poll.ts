// Loads something now and again every `everyMs` while the page shows it;
// a failure is kept for the page to show, and the next round tries again.
import { useCallback, useEffect, useRef, useState } from 'react';
import { errorText } from './format.js';

export interface Polled<T> {
  data: T | undefined;
  error: string | undefined;
  /** Loads again now. */
  reload: () => void;
}

export function usePoll<T>(load: () => Promise<T>, everyMs: number, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string>();
  const [round, setRound] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try {
        const got = await loadRef.current();
        if (!live) return;
        setData(got);
        setError(undefined);
      } catch (err) {
        if (live) setError(errorText(err));
      }
      if (live && everyMs > 0) timer = setTimeout(tick, everyMs);
    };
    void tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [everyMs, round, ...deps]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { data, error, reload };
}
