// Request headers shared by the RPC services.

/** The keepalive interval a stream's client asked for, in ms (0 = none). */
export function keepaliveIntervalMs(headers: Headers): number {
  const raw = headers.get('keepalive-ping-interval');
  if (!raw) return 0;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) return 0;
  // Never faster than 100 ms, however small the request, to bound the cost.
  return Math.max(100, Math.round(seconds * 1000));
}
