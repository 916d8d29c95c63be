// A line over time in plain SVG: the metrics need one line per chart, an
// axis of values and the time span, nothing a chart library would add.

export interface Point {
  /** ms since the epoch. */
  t: number;
  v: number;
}

const W = 480;
const H = 140;
const PAD = { left: 56, right: 8, top: 8, bottom: 20 };

export function LineChart({ title, points, format, max }: { title: string; points: Point[]; format: (v: number) => string; max?: number }) {
  const top = Math.max(max ?? 0, ...points.map((p) => p.v), 1e-9);
  const t0 = points[0]?.t ?? 0;
  const t1 = points[points.length - 1]?.t ?? t0;
  const span = Math.max(t1 - t0, 1);
  const x = (t: number) => PAD.left + ((t - t0) / span) * (W - PAD.left - PAD.right);
  const y = (v: number) => PAD.top + (1 - v / top) * (H - PAD.top - PAD.bottom);
  const path = points.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  const last = points[points.length - 1];
  return (
    <figure className="chart" data-chart={title} data-points={points.length}>
      <figcaption>
        {title} <span className="muted">{last ? format(last.v) : '—'}</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title} over time`}>
        <line x1={PAD.left} x2={W - PAD.right} y1={y(0)} y2={y(0)} className="axis" />
        <line x1={PAD.left} x2={W - PAD.right} y1={y(top)} y2={y(top)} className="grid" />
        <text x={PAD.left - 4} y={y(top) + 4} textAnchor="end">
          {format(top)}
        </text>
        <text x={PAD.left - 4} y={y(0)} textAnchor="end">
          0
        </text>
        {points.length > 0 && (
          <text x={W - PAD.right} y={H - 4} textAnchor="end">
            last {Math.round(span / 1000)} s
          </text>
        )}
        {points.length === 1 && <circle cx={x(points[0]!.t)} cy={y(points[0]!.v)} r={3} className="line-dot" />}
        {points.length > 1 && <path d={path} className="line" />}
      </svg>
    </figure>
  );
}
