/**
 * What a plan was computed against, in words for its header. Apart from saved-plan.ts (which
 * loads topologies) so the renderers' readers that only print a plan (the dashboard) stay small.
 */
import type { Plan } from './types.js';

/**
 * What a plan was computed against, for the words of its header and for apply's staleness check.
 * `live`: the layout recorded for the environment (serial 0: nothing migrated yet); `topology`:
 * another topology (`--against FILE`, `--against-ref REF`: "topology.yaml@origin/main").
 */
export type PlannedAgainst =
  | {
      kind: 'live';
      environment: string;
      serial: number;
      /** The migration that recorded that layout; null for serial 0 or a layout recorded without one. */
      migrationId: string | null;
      /** When it was recorded (ISO 8601); null when unknown. */
      recordedAt: string | null;
    }
  | { kind: 'topology'; source: string }
  | { kind: 'empty' };

/**
 * What a plan was planned against, in words for its header: "against the live layout of shop,
 * serial 12, recorded by mig_… on 2026-11-24", "against an empty environment (nothing migrated
 * yet)", "against topology.yaml@origin/main". Without `against`, from the plan's serial alone.
 */
export function describePlannedAgainst(
  plan: Pick<Plan, 'environment' | 'baseSerial'>,
  against?: PlannedAgainst,
): string {
  const seen: PlannedAgainst = against ?? {
    kind: 'live',
    environment: plan.environment,
    serial: plan.baseSerial,
    migrationId: null,
    recordedAt: null,
  };
  switch (seen.kind) {
    case 'topology':
      return `against ${seen.source}`;
    case 'empty':
      return 'against nothing (the file did not exist there: everything is new)';
    case 'live': {
      if (seen.serial === 0) return 'against an empty environment (nothing migrated yet)';
      const by = seen.migrationId === null ? '' : `, recorded by ${seen.migrationId}`;
      const on = seen.recordedAt === null ? '' : ` on ${seen.recordedAt.slice(0, 10)}`;
      return `against the live layout of ${seen.environment}, serial ${seen.serial}${by}${on}`;
    }
  }
}
