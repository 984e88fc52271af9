/**
 * The router's replication figures (router/replication-lag.ts): the engine's last report per
 * environment and component, shown on /metrics while recent, dropped once no one reports it again.
 */
import { describe, expect, it } from 'vitest';
import { renderMetricsText } from '../../router/metrics-text.js';
import {
  ReplicationFigures,
  type ReplicationReport,
  replicationFigureTtlMs,
  reportProblem,
} from '../../router/replication-lag.js';

const report: ReplicationReport = {
  environment: 'shop',
  component: 'db',
  lagSeconds: 3.5,
  lagBytes: 4096,
  maxLagSeconds: 1,
  measuredAt: 1_800_000_000_000,
  waiting: true,
};

describe('replication figures on the router', () => {
  it('shows the last report of each component as gauges, without a series where the driver cannot tell', () => {
    let now = 0;
    const figures = new ReplicationFigures(() => now);
    figures.report({ ...report, lagSeconds: 9 });
    figures.report(report);
    figures.report({ ...report, component: 'files', lagSeconds: null, lagBytes: 0, waiting: false });
    const text = renderMetricsText([], 0, [], figures.current());
    expect(text).toContain('cutover_replication_lag_seconds{environment="shop",component="db"} 3.5\n');
    expect(text).not.toMatch(/cutover_replication_lag_seconds\{environment="shop",component="files"\}/);
    expect(text).toContain('cutover_replication_lag_bytes{environment="shop",component="files"} 0\n');
    expect(text).toContain('cutover_replication_gate_waiting{environment="shop",component="db"} 1\n');
    expect(text).toContain('cutover_replication_gate_waiting{environment="shop",component="files"} 0\n');
    expect(text).toContain('cutover_replication_max_lag_seconds{environment="shop",component="db"} 1\n');
    expect(text).toContain(
      'cutover_replication_measured_at_seconds{environment="shop",component="db"} 1800000000\n',
    );
    expect(text).toContain('# TYPE cutover_replication_lag_seconds gauge');
    // Not reported again for the ttl: gone (the gate passed long ago, or the migration ended).
    now += replicationFigureTtlMs + 1;
    expect(figures.current()).toEqual([]);
    expect(renderMetricsText([], 0, [], figures.current())).not.toMatch(/\{environment="shop"/);
  });

  it('refuses a report that is not one', () => {
    expect(reportProblem(report)).toBeNull();
    expect(reportProblem('db 3s')).toBe('a JSON object is required');
    expect(reportProblem({ ...report, component: '' })).toBe('environment and component are required');
    expect(reportProblem({ ...report, lagSeconds: 'slow' })).toBe(
      'lagSeconds and lagBytes are numbers or null',
    );
    expect(reportProblem({ ...report, waiting: 'yes' })).toBe('waiting is a boolean');
  });
});
