/**
 * What every mode (local, Temporal) shares when it creates a migration: its id, its result, and
 * why a pinned plan is refused. Local-mode helpers live in migrations.ts; Temporal mode must not
 * import them.
 */
import { monotonicFactory } from 'ulid';
import { CutoverError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import type { CommitOrigin, MigrationSpec, RolledBackTo } from '../../core/migration/types.js';
import type { PlanInputs } from '../../core/plan/drift.js';
import type { SavedPlan } from '../../core/plan/saved-plan.js';
import type { Plan } from '../../core/plan/types.js';
import { own } from '../../core/records.js';
import type { Topology } from '../../core/topology/types.js';
import type { LivePlan } from './service-types.js';

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
  /** The pinned id is a saved plan's, whose topology is the one re-planned (not only its id). */
  saved = false,
): Promise<CutoverError> {
  const { buildPlan } = await import('../../core/plan/build-plan.js');
  // What the plan knew besides the layouts (requested replacements, secrets' digests), not what it observed.
  const replace = {
    ...(inputs.replace === undefined ? {} : { replace: inputs.replace }),
    ...(inputs.secrets === undefined ? {} : { secrets: inputs.secrets }),
    ...(inputs.images === undefined ? {} : { images: inputs.images }),
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
  if (saved) {
    return new CutoverError(
      'PLAN_MISMATCH',
      `re-planning the saved plan's topology against the live layout (serial ${plan.baseSerial}, the one it was planned against) gives ${shortPlanId(plan.planId)}, not the saved ${shortPlanId(pinned)}: something besides the layout changed since it was planned (what runs, or a secret's value); plan again and review`,
    );
  }
  // Not this topology's plan against the live layout, nor against a kept earlier one, nor before
  // the drift now seen: an id of something else (another branch's file, another topology, a typo).
  const older =
    gone === 0 ? '' : ` (layouts before serial ${gone + 1} are no longer kept, see CUTOVER_KEEP_LAYOUTS)`;
  return new CutoverError(
    'PLAN_MISMATCH',
    `plan id ${shortPlanId(pinned)} is not a plan of this topology against the live layout (serial ${plan.baseSerial}) or a recent one${older}: it may have been computed against another branch's file (--against-ref) or another topology; plan again against the live layout (it gives ${shortPlanId(plan.planId)}) and review`,
  );
}

/** A plan id as messages show it: enough to tell it apart. */
export function shortPlanId(planId: string): string {
  return planId.slice(0, 'sha256:'.length + 12);
}

/**
 * A saved plan is applied only against the live layout it was planned against: refused as stale
 * when the environment's serial moved, naming both serials and the migration that moved it.
 */
export function refuseMovedLayout(
  pinned: string,
  plannedSerial: number | undefined,
  current: Pick<CurrentLayout, 'environment' | 'serial' | 'migrationId' | 'committedAt'>,
): void {
  if (plannedSerial === undefined || plannedSerial === current.serial) return;
  const by = current.migrationId === undefined ? '' : ` by ${current.migrationId}`;
  const on = current.committedAt === undefined ? '' : ` on ${current.committedAt}`;
  const recorded = by === '' && on === '' ? '' : ` (recorded${by}${on})`;
  throw new CutoverError(
    'PLAN_STALE',
    `plan ${shortPlanId(pinned)} is stale: the live layout of ${current.environment} has moved since it was planned, from serial ${plannedSerial} to serial ${current.serial}${recorded}; plan again against the live layout and review the new plan`,
  );
}

/**
 * refuseMovedLayout for a saved plan, given what the live layout is now as a plan against it says
 * (every mode answers that, a server too): PLAN_STALE when it moved since the plan was saved.
 */
export function refuseStaleSavedPlan(saved: SavedPlan, live: LivePlan['against']): void {
  refuseMovedLayout(saved.plan.planId, saved.baseSerial, {
    environment: live.environment,
    serial: live.serial,
    ...(live.migrationId === null ? {} : { migrationId: live.migrationId }),
    ...(live.recordedAt === null ? {} : { committedAt: live.recordedAt }),
  });
}

/** Who started a migration and from which commit, as its spec records them (audit). */
export function auditOf(
  request: {
    startedBy?: string;
    commit?: string | null;
    commitFrom?: CommitOrigin;
    appliedCommit?: string | null;
    rolledBackTo?: RolledBackTo;
  },
  whoRunsThis: () => string,
): Pick<MigrationSpec, 'startedBy' | 'commit' | 'commitFrom' | 'appliedCommit' | 'rolledBackTo'> {
  const commit = request.commit ?? null;
  return {
    startedBy: request.startedBy ?? whoRunsThis(),
    commit,
    // Where a commit came from says nothing without one.
    ...(commit === null || request.commitFrom === undefined ? {} : { commitFrom: request.commitFrom }),
    ...(request.appliedCommit === undefined ? {} : { appliedCommit: request.appliedCommit }),
    ...(request.rolledBackTo === undefined ? {} : { rolledBackTo: { ...request.rolledBackTo } }),
  };
}
