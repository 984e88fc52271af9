/**
 * The analysis of each shift hold: the verdict and its reason, and green's and blue's success rate
 * and p99 as small bars, one group per hold, so a trend across the steps shows at a glance.
 */
import type { AnalysisRecord } from '../types.js';

interface Figures {
  successRate: number | null;
  p99Ms: number | null;
}

function Bar({
  value,
  max,
  label,
  side,
}: {
  value: number | null;
  max: number;
  label: string;
  side: string;
}) {
  const share = value === null || max <= 0 ? 0 : Math.min(1, value / max);
  return (
    <div class="bar-row">
      <span class="bar-label">{side}</span>
      <span class="bar" aria-hidden="true">
        <span class={`bar-fill ${side}`} style={{ width: `${(share * 100).toFixed(1)}%` }} />
      </span>
      <span class="bar-value">{label}</span>
    </div>
  );
}

function FigureBars({
  title,
  green,
  blue,
  pick,
  unit,
  max,
}: {
  title: string;
  green?: Figures;
  blue?: Figures;
  pick: (f: Figures) => number | null;
  unit: string;
  max: number;
}) {
  const show = (f?: Figures) => {
    const v = f ? pick(f) : null;
    return v === null ? '—' : `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
  };
  return (
    <div class="figures">
      <span class="figures-title">{title}</span>
      <Bar side="green" value={green ? pick(green) : null} max={max} label={show(green)} />
      {blue && <Bar side="blue" value={pick(blue)} max={max} label={show(blue)} />}
    </div>
  );
}

export function Analyses({ analyses }: { analyses: readonly AnalysisRecord[] | undefined }) {
  if (!analyses || analyses.length === 0) return null;
  const p99Max = Math.max(
    1,
    ...analyses.flatMap((a) => a.routes.flatMap((r) => [r.green?.p99Ms ?? 0, r.blue?.p99Ms ?? 0])),
  );
  return (
    <section aria-labelledby="analyses-title" class="card">
      <h2 id="analyses-title">Analysis at each hold</h2>
      <ol class="analyses">
        {analyses.map((a) => (
          <li key={`${a.at}`} class={`analysis ${a.outcome}`} data-weight={a.weight}>
            <p>
              <strong>
                {a.weight} % green: {a.outcome}
              </strong>{' '}
              — {a.reason}
            </p>
            {a.routes.map((r) => (
              <div key={r.route} class="route-figures">
                <span class="figures-route">route {r.route}</span>
                <FigureBars
                  title="success rate"
                  green={r.green}
                  blue={r.blue}
                  pick={(f) => f.successRate}
                  unit="%"
                  max={100}
                />
                <FigureBars
                  title="p99"
                  green={r.green}
                  blue={r.blue}
                  pick={(f) => f.p99Ms}
                  unit="ms"
                  max={p99Max}
                />
              </div>
            ))}
          </li>
        ))}
      </ol>
    </section>
  );
}
