/**
 * The replication lag of stateful components, as the engine's health gate measures it while a
 * migration switches them (issue 28): the engine reports each measure (`POST /replication`,
 * throttled to about one a second), the router keeps the last one per environment and component
 * and shows it on `/metrics`. The router measures nothing itself; a figure no one reported again
 * for `replicationFigureTtlMs` is dropped (the gate passed long ago, or the migration ended), so a
 * gauge on `/metrics` is always a recent measure.
 */

/** What the engine reports: one component's lag, measured at `measuredAt`. */
export interface ReplicationReport {
  environment: string;
  component: string;
  /** Seconds green trails blue; null when the driver cannot tell. */
  lagSeconds: number | null;
  /** Bytes of the log green has not applied; null when the driver cannot tell. */
  lagBytes: number | null;
  maxLagSeconds: number;
  /** Epoch ms. */
  measuredAt: number;
  /** The health gate waits on it (lag over maxLag). */
  waiting: boolean;
}

/** A figure is shown this long after its last report. */
export const replicationFigureTtlMs = 60_000;

/** Why a body is not a report, or null when it is one. */
export function reportProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) return 'a JSON object is required';
  const r = value as Record<string, unknown>;
  const nameOk = (v: unknown) => typeof v === 'string' && v.length > 0 && v.length <= 200;
  const numberOrNull = (v: unknown) => v === null || (typeof v === 'number' && Number.isFinite(v));
  if (!nameOk(r.environment) || !nameOk(r.component)) return 'environment and component are required';
  if (!numberOrNull(r.lagSeconds) || !numberOrNull(r.lagBytes))
    return 'lagSeconds and lagBytes are numbers or null';
  if (typeof r.maxLagSeconds !== 'number' || typeof r.measuredAt !== 'number')
    return 'maxLagSeconds and measuredAt are numbers';
  if (typeof r.waiting !== 'boolean') return 'waiting is a boolean';
  return null;
}

export class ReplicationFigures {
  private readonly figures = new Map<string, { report: ReplicationReport; receivedAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  report(report: ReplicationReport): void {
    this.figures.set(`${report.environment}/${report.component}`, { report, receivedAt: this.now() });
  }

  /** The figures reported recently, in a stable order. */
  current(): ReplicationReport[] {
    const now = this.now();
    for (const [key, figure] of this.figures) {
      if (now - figure.receivedAt > replicationFigureTtlMs) this.figures.delete(key);
    }
    return [...this.figures.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, figure]) => figure.report);
  }
}

/**
 * `cutover_replication_lag_seconds`, `cutover_replication_lag_bytes` (where the driver tells them),
 * `cutover_replication_max_lag_seconds`, `cutover_replication_gate_waiting` (1 while the gate waits)
 * and `cutover_replication_measured_at_seconds`, labelled with environment and component.
 */
export function replicationLines(
  reports: readonly ReplicationReport[],
  escapeLabel: (value: string) => string,
): string[] {
  const lines: string[] = [];
  const gauge = (name: string, help: string, value: (r: ReplicationReport) => number | null) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const r of reports) {
      const v = value(r);
      if (v === null) continue;
      lines.push(
        `${name}{environment="${escapeLabel(r.environment)}",component="${escapeLabel(r.component)}"} ${v}`,
      );
    }
  };
  gauge(
    'cutover_replication_lag_seconds',
    "How far a switched component's green trails blue, as the health gate last measured it.",
    (r) => r.lagSeconds,
  );
  gauge('cutover_replication_lag_bytes', 'Bytes of the log green has not applied yet.', (r) => r.lagBytes);
  gauge('cutover_replication_max_lag_seconds', "The component's replicate.maxLag.", (r) => r.maxLagSeconds);
  gauge(
    'cutover_replication_gate_waiting',
    'Whether the health gate waits on this lag (1: over maxLag).',
    (r) => (r.waiting ? 1 : 0),
  );
  gauge(
    'cutover_replication_measured_at_seconds',
    'When the lag was measured, in seconds since the epoch.',
    (r) => r.measuredAt / 1000,
  );
  return lines;
}
