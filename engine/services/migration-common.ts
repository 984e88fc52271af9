/**
 * What every mode (local, Temporal) shares when it creates a migration: its id, its result, and
 * why a pinned plan is refused. Local-mode helpers live in migrations.ts; Temporal mode must not
 * import them.
 */
import { monotonicFactory } from 'ulid';
import { CutoverError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import type { MigrationSpec } from '../../core/migration/types.js';
import type { PlanInputs } from '../../core/plan/drift.js';
import type { Plan } from '../../core/plan/types.js';
import { own } from '../../core/records.js';
import type { Topology } from '../../core/topology/types.js';

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

/**
 * `--replace` names components of the topology file: refuse any other name, naming the file, before
 * anything is planned or claimed.
 */
export function checkReplace(desired: Topology, replace: readonly string[] | undefined, file: string): void {
  for (const name of replace ?? []) {
    if (!own(desired.components, name)) {
      const known = Object.keys(desired.components).sort().join(', ');
      throw new CutoverError(
        'USAGE',
        `--replace ${name}: ${file} has no component ${name} (its components: ${known || 'none'})`,
      );
    }
  }
}

/**
 * Tells a stale plan (the layout moved on since it was computed, or what runs changed: drift seen
 * or gone) from one that differs. `current` and `inputs`: what the refused plan was computed from.
 */
export async function pinError(
  layoutAt: (serial: number) => Promise<CurrentLayout | null>,
  pinned: string,
  plan: Plan,
  desired: MigrationSpec['desired'],
  current?: CurrentLayout,
  inputs: PlanInputs = {},
): Promise<CutoverError> {
  const { buildPlan } = await import('../../core/plan/build-plan.js');
  // What the plan knew besides the layouts (requested replacements, secrets' digests), not what it observed.
  const replace = {
    ...(inputs.replace === undefined ? {} : { replace: inputs.replace }),
    ...(inputs.secrets === undefined ? {} : { secrets: inputs.secrets }),
  };
  // The newest earlier layout no longer kept (only the last few are): a stale plan may be one of those.
  let gone = 0;
  for (let serial = plan.baseSerial - 1; serial >= Math.max(0, plan.baseSerial - 50); serial--) {
    const old = await layoutAt(serial);
    if (old === null && serial > 0 && gone === 0) gone = serial;
    if (old && buildPlan(old, desired, replace).planId === pinned) {
      return new CutoverError(
        'PLAN_STALE',
        `plan ${shortPlanId(pinned)} is stale: it was computed against serial ${serial} of ${plan.environment}, which is now at serial ${plan.baseSerial}; plan again and review the new plan (${shortPlanId(plan.planId)})`,
      );
    }
  }
  const drift = plan.drift ?? [];
  if (inputs.observed && current && buildPlan(current, desired, replace).planId === pinned) {
    const now = drift.map((d) => `${d.kind} ${d.name}: ${d.reason}`).join('; ');
    return new CutoverError(
      'PLAN_STALE',
      `plan ${shortPlanId(pinned)} did not see what runs now (${now}): it was planned from the record alone or before this changed; plan again and review the new plan (${shortPlanId(plan.planId)})`,
    );
  }
  const what = inputs.observed ? 'the topology file, or what runs (drift),' : 'the topology file';
  return new CutoverError(
    'PLAN_MISMATCH',
    `the plan of this topology is ${shortPlanId(plan.planId)}, not the reviewed ${shortPlanId(pinned)}: ${what} changed since it was planned${gone === 0 ? '' : `, or it was planned against a layout before serial ${gone + 1}, which is no longer kept (see CUTOVER_KEEP_LAYOUTS)`}; plan again and review`,
  );
}

/** A plan id as messages show it: enough to tell it apart. */
export function shortPlanId(planId: string): string {
  return planId.slice(0, 'sha256:'.length + 12);
}
