/**
 * Each route's weight on green over the migration, read from its log's traffic steps ("route www
 * at 10% green") and undo steps ("undo: routes a, b back to blue done"): a step chart per route and
 * the weight now.
 */
import type { LogLineJson } from '../types.js';

export interface WeightPoint {
  at: number;
  percent: number;
}

/** Every weight set, per route, in order. */
export function weightsFromLog(lines: readonly LogLineJson[]): Map<string, WeightPoint[]> {
  const out = new Map<string, WeightPoint[]>();
  for (const line of lines) {
    if (line.kind !== 'traffic_step' && line.kind !== 'rollback_step') continue;
    const step = /^(?:undo: )?routes? (.+?) (?:at (\d+)% green|(back to blue))(?: done)?$/.exec(line.message);
    if (!step?.[1]) continue;
    const percent = step[3] ? 0 : Number(step[2]);
    for (const route of step[1].split(', ')) {
      const list = out.get(route) ?? [];
      list.push({ at: Date.parse(line.at), percent });
      out.set(route, list);
    }
  }
  return out;
}

const width = 240;
const height = 48;

function StepChart({ points, until }: { points: WeightPoint[]; until: number }) {
  const first = points[0]?.at ?? until;
  const span = Math.max(1, until - first);
  const x = (at: number) => ((at - first) / span) * width;
  const y = (percent: number) => height - (percent / 100) * height;
  let d = `M0 ${height}`;
  for (const p of points) d += ` H${x(p.at).toFixed(1)} V${y(p.percent).toFixed(1)}`;
  d += ` H${width}`;
  return (
    <svg class="chart" viewBox={`0 0 ${width} ${height}`} width={width} height={height} aria-hidden="true">
      <rect x="0" y="0" width={width} height={height} class="chart-bg" />
      <path d={d} class="chart-line" />
    </svg>
  );
}

export function RouteWeights({ lines, until }: { lines: readonly LogLineJson[]; until: number }) {
  const routes = weightsFromLog(lines);
  if (routes.size === 0) return null;
  return (
    <section aria-labelledby="weights-title" class="card">
      <h2 id="weights-title">Route weights</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Route</th>
            <th scope="col">Green now</th>
            <th scope="col">Steps</th>
            <th scope="col">Over time</th>
          </tr>
        </thead>
        <tbody>
          {[...routes].map(([route, points]) => (
            <tr key={route} data-route={route}>
              <th scope="row">{route}</th>
              <td data-field="green">{points.at(-1)?.percent ?? 0} %</td>
              <td>{points.map((p) => `${p.percent} %`).join(' → ')}</td>
              <td>
                <StepChart points={points} until={until} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
