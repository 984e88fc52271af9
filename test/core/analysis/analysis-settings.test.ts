import { describe, expect, it } from 'vitest';
import { type AnalysisSettings, parseAnalysisSettings } from '../../../core/analysis/analysis-settings.js';
import { emptySlotTraffic } from '../../../core/analysis/traffic.js';
import { judgeWindow } from '../../../core/analysis/verdict.js';

const at = ['routes', 'web', 'shift', 0, 'analysis'];

describe('analysis settings', () => {
  it('reads the checks of the issue, durations in the topology grammar, minRequests 50 by default', () => {
    const result = parseAnalysisSettings(
      {
        successRate: { min: 99 },
        latency: { p99: { max: '500ms' } },
        compareWithBlue: { p99: { maxRatio: 2 } },
        prometheus: [{ url: 'http://127.0.0.1:9090', query: 'up', min: 1 }],
      },
      at,
    );
    expect(result.problems).toEqual([]);
    expect(result.settings).toEqual({
      checks: {
        minRequests: 50,
        successRate: { min: 99 },
        latency: { p99: { maxMs: 500 } },
        compareWithBlue: { p99: { maxRatio: 2 } },
      },
      prometheus: [{ url: 'http://127.0.0.1:9090', query: 'up', min: 1 }],
    });
  });

  it('names the field and what to write for each mistake', () => {
    const result = parseAnalysisSettings(
      {
        minRequests: 0,
        successRate: { min: 101 },
        latency: { p99: { max: '500 ms' } },
        prometheus: [{ url: 'prometheus:9090', query: 'up' }],
        sucessRate: 1,
      },
      at,
    );
    const lines = result.problems.map((p) => `${p.path.join('.')}: ${p.message}`).sort();
    expect(lines).toEqual([
      'routes.web.shift.0.analysis.latency.p99.max: must be a duration such as 500ms, 30s, 2m or 1m30s',
      'routes.web.shift.0.analysis.minRequests: must be >= 1',
      'routes.web.shift.0.analysis.prometheus.0.url: must be an http:// or https:// URL, e.g. http://127.0.0.1:9090',
      'routes.web.shift.0.analysis.successRate.min: must be <= 100',
      'routes.web.shift.0.analysis.sucessRate: is not a setting of analysis here',
    ]);
  });

  it('refuses a p99 bound the histogram cannot judge, an empty range and no check at all', () => {
    expect(parseAnalysisSettings({ latency: { p99: { max: '1m' } } }, at).problems).toEqual([
      {
        path: [...at, 'latency', 'p99', 'max'],
        message:
          "must be below 30s: the router's latency histogram ends there and reads any slower p99 as 30s, so a bound of 30s or more could never be breached",
      },
    ]);
    expect(
      parseAnalysisSettings({ prometheus: [{ url: 'http://p:9090', query: 'up', min: 2, max: 1 }] }, at)
        .problems,
    ).toEqual([{ path: [...at, 'prometheus', 0, 'min'], message: 'is above max (1): no value could pass' }]);
    expect(
      parseAnalysisSettings({ prometheus: [{ url: 'http://p:9090', query: 'up' }] }, at).problems,
    ).toEqual([
      { path: [...at, 'prometheus', 0], message: 'needs min or max: the bound its value is judged against' },
    ]);
    expect(parseAnalysisSettings({ minRequests: 10 }, at).problems).toEqual([
      { path: at, message: 'names no check: set successRate, latency, compareWithBlue or prometheus' },
    ]);
  });

  it('refuses a p99 bound of exactly the histogram top, and a bound just below it is breached by a slower green', () => {
    expect(parseAnalysisSettings({ latency: { p99: { max: '30s' } } }, at).problems).toEqual([
      {
        path: [...at, 'latency', 'p99', 'max'],
        message:
          "must be below 30s: the router's latency histogram ends there and reads any slower p99 as 30s, so a bound of 30s or more could never be breached",
      },
    ]);
    const parsed = parseAnalysisSettings({ minRequests: 1, latency: { p99: { max: '29s' } } }, at);
    expect(parsed.problems).toEqual([]);
    // 100 requests all slower than the histogram's top (the +Inf bucket): a p99 of "30s" at most.
    const slow = emptySlotTraffic();
    slow.requests = 100;
    slow.buckets[slow.buckets.length - 1] = 100;
    const verdict = judgeWindow({ green: slow }, (parsed.settings as AnalysisSettings).checks);
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toContain('green p99');
  });
});
