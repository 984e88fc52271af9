import { commitIndex, routesToPromote } from './queries.js';
import type { ActionRun, Command, MigrationState } from './types.js';

/** The state as it was stored before commands ran concurrently (one command in flight at most). */
interface StateV1 {
  cursor: number;
  subStep: number;
  attempt: number;
  gateRemainingMs: number | null;
  inflight: Command | null;
  cancelling: string | null;
}

/**
 * A state stored by an earlier version (a Temporal run's continue-as-new input, a status read from
 * an old workflow), in today's shape. The old one ran one action at a time: the action at `cursor`
 * is the one started, if any, and every action before it is done. Today's states pass unchanged.
 */
export function upgradeState(stored: MigrationState): MigrationState {
  if (Array.isArray((stored as { inflight: unknown }).inflight)) return stored;
  const old = stored as unknown as MigrationState & StateV1;
  const { subStep, gateRemainingMs, ...rest } = old;
  const inflight = old.inflight ? [old.inflight] : [];
  const actions = old.spec.plan.actions;
  // The command in flight is the cursor's action's (its call, or the wait before retrying it)
  // unless it is the bake's wait, a commit step of no action, or an undo step.
  const ownedByAction = old.inflight !== null && old.cursor < actions.length && inActionPhase(old);
  const started = ownedByAction || subStep > 0 || gateRemainingMs !== null;
  const running: ActionRun[] =
    started && inActionPhase(old)
      ? [
          {
            index: old.cursor,
            subStep,
            attempt: old.attempt,
            gateRemainingMs,
            command: ownedByAction ? (old.inflight as Command).id : null,
          },
        ]
      : [];
  return {
    ...rest,
    done: Array.from({ length: Math.min(old.cursor, actions.length) }, (_, i) => i),
    running,
    attempt: running.length > 0 ? 1 : old.attempt,
    inflight,
    cancelling: old.cancelling === null ? [] : [old.cancelling],
  };
}

/** Whether the old state was running the action at its cursor (not the bake, a commit step of no action, or the undo). */
function inActionPhase(old: MigrationState & StateV1): boolean {
  if (old.cursor >= old.spec.plan.actions.length) return false;
  if (old.lifecycle === 'running' || old.lifecycle === 'paused') return old.cursor < commitIndex(old.spec);
  if (old.lifecycle !== 'committing') return false;
  return old.layoutRecorded && old.routesPromoted >= routesToPromote(old).length;
}
