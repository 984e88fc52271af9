/**
 * `migrate --plan-id` / `topology apply`: when the plan this process sees differs from the pinned
 * one, the pinned start is tried first to get its refusal. Planned again under the environment's
 * claim, the pinned plan can be what runs after all (what runs changed back between the two looks):
 * then a migration was created, and the flow must follow it rather than ask and start a second
 * one, which conflicted with its own stranded migration (and, without a terminal, refused after
 * having created it).
 */
import { describe, expect, it } from 'vitest';
import { migrateTo } from '../../cli/commands/migrate-action.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { Plan } from '../../core/plan/types.js';
import type { MigrationService, StartResult } from '../../engine/services/migration-service.js';
import { testContext } from '../support/cli.js';

const summary = {
  id: 'mig_01jd3x0000000000000000000a',
  environment: 'shop',
  lifecycle: 'completed',
  status: 'completed',
  planId: 'sha256:pinned',
  startedAt: 1_764_000_000_000,
  updatedAt: 1_764_000_001_000,
  committedAt: 1_764_000_001_000,
  endedAt: 1_764_000_001_000,
} as unknown as MigrationSummary;

const seenPlan = {
  formatVersion: '1.1',
  environment: 'shop',
  planId: 'sha256:seen',
  baseSerial: 1,
  actions: [{ id: 'provision_green:web', stage: 'provision_green', type: 'provision', component: 'web' }],
  settings: [],
} as unknown as Plan;

describe('a pinned start', () => {
  it('that the engine accepts after all is followed, not asked about and started twice', async () => {
    const run = testContext();
    const starts: { planId: string }[] = [];
    const service = {
      reachAgain: '',
      attach: async () => ({ done: async () => summary, leave: async () => 'nowhere' }),
      show: async () => ({ summary }),
    } as unknown as MigrationService;
    const created: StartResult = {
      created: true,
      summary,
      planId: 'sha256:pinned',
      runs: '',
      runnerPid: null,
    };
    const code = await migrateTo(
      service,
      {
        plan: async () => seenPlan,
        start: async (pin) => {
          starts.push(pin);
          return created;
        },
      },
      // No --yes and no terminal: asking would refuse.
      { planId: 'sha256:pinned', json: true },
      run.context,
    );
    expect(starts).toEqual([{ attach: true, planId: 'sha256:pinned' }]);
    expect(code).toBe(0);
    expect(JSON.parse(run.stdout())).toMatchObject({ summary: { id: summary.id } });
  });
});
