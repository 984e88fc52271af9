import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  emptySlotTraffic,
  latencyBucketBoundsMs,
  quantileMs,
  type SlotTraffic,
  trafficBetween,
} from '../../../core/analysis/traffic.js';
import { type AnalysisChecks, judgeWindow } from '../../../core/analysis/verdict.js';

/** Traffic of `requests` requests, `errors` of them 5xx, each taking one of `durationsMs` in turn. */
function traffic(requests: number, errors: number, durationsMs: readonly number[] = [5]): SlotTraffic {
  const t = emptySlotTraffic();
  for (let i = 0; i < requests; i++) {
    const ms = durationsMs[i % durationsMs.length] ?? 5;
    t.requests++;
    if (i < errors) t.errors5xx++;
    t.durationSumMs += ms;
    latencyBucketBoundsMs.forEach((bound, b) => {
      if (ms <= bound) t.buckets[b] = (t.buckets[b] ?? 0) + 1;
    });
    t.buckets[latencyBucketBoundsMs.length] = (t.buckets[latencyBucketBoundsMs.length] ?? 0) + 1;
  }
  return t;
}

const issueChecks: AnalysisChecks = {
  minRequests: 50,
  successRate: { min: 99 },
  latency: { p99: { maxMs: 500 } },
};

describe('the analysis verdict', () => {
  it('breaches a green failing 4.2 % and says so with the rate, the requests and the step', () => {
    const verdict = judgeWindow({ green: traffic(500, 21) }, issueChecks, { weight: 10 });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toBe('green 5xx 4.2 % > 1 % over 500 requests at the 10 % step');
  });

  it('breaches a slow green with its p99', () => {
    const slow = traffic(512, 0, [2100]);
    const verdict = judgeWindow({ green: slow }, issueChecks, { weight: 10 });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toMatch(/^green p99 2\.\d+ s > 500 ms over 512 requests at the 10 % step$/);
  });

  it('names both breaches when both happen', () => {
    const verdict = judgeWindow({ green: traffic(100, 10, [900]) }, issueChecks);
    expect(verdict.reason).toMatch(/^green 5xx 10 % > 1 %; green p99 \d+ ms > 500 ms over 100 requests$/);
  });

  it('passes a healthy green, with the figures', () => {
    const verdict = judgeWindow({ green: traffic(200, 1, [3, 4, 40]) }, issueChecks, { weight: 50 });
    expect(verdict.outcome).toBe('pass');
    expect(verdict.reason).toMatch(
      /^green 5xx 0\.5 % ≤ 1 %; green p99 \d+ ms ≤ 500 ms over 200 requests at the 50 % step$/,
    );
    expect(verdict.green).toMatchObject({ requests: 200, errors5xx: 1, successRate: 99.5 });
  });

  it('is inconclusive with fewer green requests than minRequests, even when all of them failed', () => {
    const verdict = judgeWindow({ green: traffic(49, 49) }, issueChecks, { weight: 10 });
    expect(verdict.outcome).toBe('inconclusive');
    expect(verdict.reason).toBe(
      'green had 49 requests, fewer than the 50 needed to judge it at the 10 % step',
    );
  });

  it('shows a rate just above the bound with the decimals it takes to read as above it', () => {
    const verdict = judgeWindow({ green: traffic(10_000, 102) }, issueChecks);
    expect(verdict.reason).toBe('green 5xx 1.02 % > 1 % over 10000 requests');
  });

  it('breaches a green whose p99 is 10× blue’s when compared with blue', () => {
    const checks: AnalysisChecks = { minRequests: 50, compareWithBlue: { p99: { maxRatio: 2 } } };
    const verdict = judgeWindow({ green: traffic(300, 0, [1200]), blue: traffic(900, 0, [120]) }, checks, {
      weight: 10,
    });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toMatch(
      /^green p99 1\.\d+ s is \d+× blue's 1\d\d ms \(more than 2×\) over 300 requests at the 10 % step$/,
    );
  });

  it('skips the comparison, saying why, when blue had too few requests', () => {
    const checks: AnalysisChecks = { minRequests: 50, compareWithBlue: { p99: { maxRatio: 2 } } };
    const verdict = judgeWindow({ green: traffic(300, 0, [1200]), blue: traffic(3, 0) }, checks);
    expect(verdict.outcome).toBe('pass');
    expect(verdict.reason).toBe(
      'no comparison with blue: it had 3 requests, fewer than 50 over 300 requests',
    );
  });

  it('estimates quantiles as histogram_quantile does: linear inside the bucket', () => {
    // 100 requests all in the (10, 15] bucket: the p50 is half way through it.
    expect(quantileMs(traffic(100, 0, [12]), 0.5)).toBeCloseTo(12.5, 6);
    // Beyond the last finite bound: the highest finite bound.
    expect(quantileMs(traffic(10, 0, [60_000]), 0.99)).toBe(30_000);
    expect(quantileMs(emptySlotTraffic(), 0.99)).toBeNull();
  });

  it('property: breach on the success rate iff it is below the minimum, once there are minRequests', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.integer({ min: 1, max: 200 }),
        (requests, errorShare, min, minRequests) => {
          const errors = Math.floor(requests * errorShare);
          const verdict = judgeWindow(
            { green: traffic(requests, errors, [1]) },
            { minRequests, successRate: { min } },
          );
          if (requests < minRequests) return verdict.outcome === 'inconclusive';
          const rate = (100 * (requests - errors)) / requests;
          return verdict.outcome === (rate < min ? 'breach' : 'pass');
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: a window is the difference of two snapshots, and judging it ignores what came before', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 400 }),
        fc.integer({ min: 0, max: 400 }),
        fc.array(fc.integer({ min: 0, max: 40_000 }), { minLength: 1, maxLength: 5 }),
        (before, during, durations) => {
          // Requests before the window all failed; those in it are healthy.
          const start = traffic(before, before, durations);
          const end = traffic(before + during, before, durations);
          const window = trafficBetween(start, end);
          expect(window.requests).toBe(during);
          expect(window.errors5xx).toBe(0);
          expect(window.buckets[window.buckets.length - 1]).toBe(during);
          const verdict = judgeWindow({ green: window }, { minRequests: 1, successRate: { min: 99 } });
          return verdict.outcome === (during === 0 ? 'inconclusive' : 'pass');
        },
      ),
      { numRuns: 200 },
    );
  });
});
