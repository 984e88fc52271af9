/**
 * The start-to-close bound of each driver call's activity (a pure unit test): past the longest a
 * healthy call can take, so Temporal never restarts a long hold or a hook from scratch.
 */
import { describe, expect, it } from 'vitest';
import type { Command, MigrationSpec } from '../../core/migration/types.js';
import { activityMarginMs, activityTimeoutMs } from '../../engine/temporal/activity-timeouts.js';

const hour = 60 * 60_000;
const spec = {
  desired: {
    strategy: {
      hooks: {
        preRollout: [
          { name: 'smoke', command: ['true'], timeout: 40 * 60_000, retries: 3, retryDelay: 5 * 60_000 },
        ],
      },
    },
  },
} as unknown as MigrationSpec;

describe('activity timeouts (Temporal mode)', () => {
  it('an analysis hold gets twice its length and a margin: an extension doubles the hold', () => {
    const analyze = { id: 'a', kind: 'analyze', weight: 10, ms: 3 * hour, routes: [] } as Command;
    expect(activityTimeoutMs(analyze, spec)).toBe(6 * hour + activityMarginMs);
  });

  it('a hook gets every attempt to its timeout, the delays between them and a margin', () => {
    const hook = { id: 'h', kind: 'hook', point: 'preRollout', index: 0, name: 'smoke' } as Command;
    // 4 attempts of 40 min and 3 delays of 5 min: 175 min, past the 2 h every other call gets.
    expect(activityTimeoutMs(hook, spec)).toBe(4 * 40 * 60_000 + 3 * 5 * 60_000 + activityMarginMs);
    expect(activityTimeoutMs(hook, spec)).toBeGreaterThan(2 * hour);
  });

  it('a health gate keeps its deadline and a margin; a route call two minutes', () => {
    const check = {
      id: 'c',
      kind: 'check_health',
      component: 'web',
      deadlineMs: 15_000,
    } as unknown as Command;
    expect(activityTimeoutMs(check, spec)).toBe(15_000 + activityMarginMs);
    const route = { id: 'r', kind: 'apply_route', route: 'www' } as unknown as Command;
    expect(activityTimeoutMs(route, spec)).toBe(120_000);
  });
});
