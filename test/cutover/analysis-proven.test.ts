/**
 * Analysis that sees what a green that hangs, or fails everything at low traffic, does (issue 26,
 * items 2 and 3): real app processes behind the real router, load counted at the client, the real
 * CLI. Before, both "passed with a warning" for want of traffic and the migration completed.
 *
 * - a green answering after 20 s, at a 10 % step with a 3 s hold and `latency.p99.max: 500ms`:
 *   its requests in flight past 500 ms count against it; it answered none: rolled back;
 * - 3 requests/s, green failing every request: fewer than minRequests, but every one failed (or
 *   more than successRate.min allows of minRequests): rolled back.
 */
import { describe, expect, it } from 'vitest';
import { canaryPerFile, migrateUnderLoad, type Release } from '../support/canary.js';

const canary = canaryPerFile();

function release(env: Release['env'], shift: string): void {
  canary.release({ env: env ?? {}, shift });
}

/** A load's timeout longer than the hanging green's 20 s: its requests stay in flight. */
const loadTimeoutMs = 30_000;

describe('analysis proves a breach on little traffic', { timeout: 90_000 }, () => {
  it('a green that hangs (answers after 20 s) is rolled back: its requests in flight past 500 ms count', async () => {
    release(
      { DELAY_MS: 20_000 },
      '[{ weight: 10, hold: 3s, analysis: { latency: { p99: { max: 500ms } } } }, 100]',
    );
    const run = await migrateUnderLoad(canary.w, { rate: 100, timeoutMs: loadTimeoutMs });
    expect(run.end.lifecycle).toBe('rolled_back');
    expect(run.end.reason).toMatch(
      /^analysis failed: green (answered none of its requests: \d+ in flight past 500 ms|slower than 500 ms on .*) at the 10 % step/,
    );
  });

  it('3 requests/s, green failing every request: rolled back, not passed for want of traffic', async () => {
    release({ FAIL_EVERY: 1 }, '[{ weight: 50, hold: 3s, analysis: { successRate: { min: 99 } } }, 100]');
    const run = await migrateUnderLoad(canary.w, { rate: 3, timeoutMs: loadTimeoutMs });
    expect(run.end.lifecycle).toBe('rolled_back');
    expect(run.end.reason).toMatch(
      /^analysis failed: green 5xx on (every one of its \d+ requests?|\d+ requests, more than the 0 that successRate\.min 99 % allows of 50) over \d+ requests? at the 50 % step, fewer than the 50 needed but enough to prove it$/,
    );
  });
});
