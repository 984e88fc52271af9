/**
 * A plan against the live layout, with what that layout was (its serial, the migration that
 * recorded it, and when): what a saved plan and a plan's header say it was planned against.
 * Shared by the modes that read the layout themselves (local, Temporal); a server answers it in
 * POST /v1/plan with `saved: true`.
 */
import type { LivePlan, MigrationService, PlanOptions, TopologySource } from './service-types.js';

export async function planAgainstLive(
  service: Pick<MigrationService, 'plan' | 'layoutAt'>,
  desired: TopologySource,
  options: PlanOptions = {},
): Promise<LivePlan> {
  const plan = await service.plan(desired, { kind: 'recorded' }, options);
  // The layout of the plan's own serial (kept by serial), not "the current one" read again: a
  // commit between the two reads cannot pair the plan with another layout's migration.
  const layout = plan.baseSerial === 0 ? null : await service.layoutAt(plan.environment, plan.baseSerial);
  return {
    plan,
    against: {
      kind: 'live',
      environment: plan.environment,
      serial: plan.baseSerial,
      migrationId: layout?.migrationId ?? null,
      recordedAt: layout?.committedAt ?? null,
    },
  };
}
