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

/** The traffic with requests in flight that have waited `agesMs` so far. */
function withInFlight(t: SlotTraffic, agesMs: readonly number[]): SlotTraffic {
  const inFlight = new Array<number>(latencyBucketBoundsMs.length + 1).fill(0);
  for (const age of agesMs) {
    latencyBucketBoundsMs.forEach((bound, b) => {
      if (age <= bound) inFlight[b] = (inFlight[b] ?? 0) + 1;
    });
    inFlight[latencyBucketBoundsMs.length] = (inFlight[latencyBucketBoundsMs.length] ?? 0) + 1;
  }
  return { ...t, inFlight };
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

  it('is inconclusive with fewer green requests than minRequests when they do not prove a breach', () => {
    const checks: AnalysisChecks = { minRequests: 50, successRate: { min: 90 } };
    // 5 of 49 failed: 44 more successes would make 5 of 93, within 10 %.
    const verdict = judgeWindow({ green: traffic(49, 5) }, checks, { weight: 10 });
    expect(verdict.outcome).toBe('inconclusive');
    expect(verdict.reason).toBe(
      'green had 49 requests, fewer than the 50 needed to judge it at the 10 % step',
    );
  });

  // Issue 26, item 3: 3 requests/s, green failing 2 of 2 passed with a warning.
  it('breaches a green that failed every one of too few requests', () => {
    const verdict = judgeWindow(
      { green: traffic(2, 2) },
      { minRequests: 50, successRate: { min: 50 } },
      {
        weight: 10,
      },
    );
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toBe(
      'green 5xx on every one of its 2 requests over 2 requests at the 10 % step, fewer than the 50 needed but enough to prove it',
    );
  });

  it('breaches when the 5xx alone are more than successRate.min allows of minRequests', () => {
    const verdict = judgeWindow({ green: traffic(20, 6) }, { minRequests: 50, successRate: { min: 90 } });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toBe(
      'green 5xx on 6 requests, more than the 5 that successRate.min 90 % allows of 50 over 20 requests, fewer than the 50 needed but enough to prove it',
    );
    // 5 is what 90 % allows of 50: not proven yet.
    expect(
      judgeWindow({ green: traffic(20, 5) }, { minRequests: 50, successRate: { min: 90 } }).outcome,
    ).toBe('inconclusive');
  });

  // Issue 26, item 2: a green that hangs answered nothing, and "had 0 requests".
  it('counts requests in flight past the latency bound: a green that answered none breaches', () => {
    const hung = withInFlight(emptySlotTraffic(), [2_000, 1_200, 900, 100]);
    const verdict = judgeWindow({ green: hung }, issueChecks, { weight: 10 });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toBe(
      'green answered none of its requests: 3 in flight past 500 ms at the 10 % step',
    );
    expect(verdict.green.requests).toBe(3);
  });

  it('counts requests in flight past the bound as slow ones, toward minRequests', () => {
    // 60 quick answers and 2 requests hanging: p99 of 62 is among the hanging ones.
    const some = withInFlight(traffic(60, 0, [5]), [3_000, 2_500]);
    const verdict = judgeWindow({ green: some }, issueChecks, { weight: 10 });
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toMatch(
      /^green p99 [\d.]+ s > 500 ms over 62 requests at the 10 % step \(2 of them still in flight past 500 ms\)$/,
    );
    // Without a latency check, in flight past 1 s counts too (as requests, not failures).
    const checks: AnalysisChecks = { minRequests: 50, successRate: { min: 99 } };
    expect(judgeWindow({ green: some }, checks).green.requests).toBe(62);
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
          if (requests < minRequests) {
            // Inconclusive unless what was seen proves the breach whatever comes next.
            const proven =
              requests > 0 &&
              (errors === requests || errors > Math.floor((minRequests * (100 - min)) / 100 + 1e-9));
            return verdict.outcome === (proven ? 'breach' : 'inconclusive');
          }
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
