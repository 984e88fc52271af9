/**
 * What every mode (local, Temporal) shares when it creates a migration: its id, its result, and
 * why a pinned plan is refused. Local-mode helpers live in migrations.ts; Temporal mode must not
 * import them.
 */
import { monotonicFactory } from 'ulid';
import { CutoverError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import type { MigrationSpec } from '../../core/migration/types.js';
import type { SecretDigests } from '../../core/plan/secret-changes.js';
import type { Plan } from '../../core/plan/types.js';

const nextUlid = monotonicFactory();

/** `mig_` and a ULID in lower case: unique, sorted by creation time; any unique prefix finds it. */
export function newMigrationId(): string {
  return `mig_${nextUlid().toLowerCase()}`;
}

export type CreateResult =
  | {
      created: true;
      spec: MigrationSpec /** Something repaired on the way, for the operator. */;
      notice?: string;
    }
  | { created: false; plan: Plan };

/** Tells a stale plan (the layout moved on since it was computed) from one that differs. */
export async function pinError(
  layoutAt: (serial: number) => Promise<CurrentLayout | null>,
  pinned: string,
  plan: Plan,
  desired: MigrationSpec['desired'],
  secrets?: SecretDigests,
): Promise<CutoverError> {
  const { buildPlan } = await import('../../core/plan/build-plan.js');
  for (let serial = plan.baseSerial - 1; serial >= Math.max(0, plan.baseSerial - 50); serial--) {
    const old = await layoutAt(serial);
    if (old && buildPlan(old, desired, secrets).planId === pinned) {
      return new CutoverError(
        'PLAN_STALE',
        `plan ${short(pinned)} is stale: it was computed against serial ${serial} of ${plan.environment}, which is now at serial ${plan.baseSerial}; plan again and review the new plan (${short(plan.planId)})`,
      );
    }
  }
  return new CutoverError(
    'PLAN_MISMATCH',
    `the plan of this topology is ${short(plan.planId)}, not the reviewed ${short(pinned)}: the topology file changed since it was planned; plan again and review`,
  );
}

function short(planId: string): string {
  return planId.slice(0, 'sha256:'.length + 12);
}
