import { useSigned } from '../context.js';
import { bytes } from '../format.js';
import { usePoll } from '../use-poll.js';
import { LineChart } from './line-chart.js';

/** How far back the charts reach. */
const WINDOW_S = 15 * 60;

/** The sandbox's CPU, memory and disk samples as charts, read again every two seconds. */
export function SandboxMetrics({ id }: { id: string }) {
  const { control } = useSigned();
  const metrics = usePoll(() => control.getSandboxMetrics(id, { start: Math.floor(Date.now() / 1000) - WINDOW_S }), 2000, [id]);
  const samples = metrics.data ?? [];
  const at = (s: { timestamp: string }) => Date.parse(s.timestamp);
  const last = samples[samples.length - 1];
  return (
    <div>
      {metrics.error && <p className="error">{metrics.error}</p>}
      <p className="muted" data-testid="samples">
        {samples.length} samples
      </p>
      <div className="charts">
        <LineChart title="CPU" points={samples.map((s) => ({ t: at(s), v: s.cpuUsedPct }))} format={(v) => `${v.toFixed(1)} %`} max={1} />
        <LineChart title="Memory" points={samples.map((s) => ({ t: at(s), v: s.memUsed }))} format={bytes} max={last?.memTotal} />
        <LineChart title="Disk" points={samples.map((s) => ({ t: at(s), v: s.diskUsed }))} format={bytes} />
      </div>
    </div>
  );
}
