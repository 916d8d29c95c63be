// How times and sizes read on the pages.

/** `3m 20s`, `2h 5m`, `4d 1h`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export const age = (iso: string, now = Date.now()) => duration(now - Date.parse(iso));

/** Time left until `iso`, or `expired`. */
export function until(iso: string, now = Date.now()): string {
  const left = Date.parse(iso) - now;
  return left <= 0 ? 'expired' : `in ${duration(left)}`;
}

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export const time = (iso: string) => new Date(iso).toLocaleString();

export const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
