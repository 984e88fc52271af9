/**
 * What became of each action of a migration, the same in every view (`show` as text and JSON, the
 * API): done, in progress, undone by the rollback (after it ran, or stopped while it ran), failed
 * (the migration ended on it), or never run. A pure reading of the state.
 */
import { sortedHas } from './plan-index.js';
import type { MigrationState } from './types.js';

export type ActionOutcome =
  /** Ran to its end, and stands. */
  | 'done'
  /** Started and not finished (the migration is in flight). */
  | 'running'
  /** Ran to its end, then the migration's ending undid it (or is undoing it). */
  | 'undone'
  /** Was running when the migration ended (a failed analysis, a rollback, a cancel), and was undone. */
  | 'stopped'
  /** The migration failed on it. */
  | 'failed'
  /** Never started. */
  | 'not_run';

export interface ActionOutcomeEntry {
  id: string;
  outcome: ActionOutcome;
}

/** Whether the migration is ending or ended by undoing what it did. */
export function isUndoing(state: MigrationState): boolean {
  return (
    state.lifecycle === 'rolling_back' ||
    state.lifecycle === 'rolled_back' ||
    state.lifecycle === 'cancelled' ||
    state.lifecycle === 'failed'
  );
}

export function actionOutcome(state: MigrationState, index: number): ActionOutcome {
  const undoing = isUndoing(state);
  if (sortedHas(state.done, index)) return undoing ? 'undone' : 'done';
  const running = state.running.some((r) => r.index === index);
  if (state.lifecycle === 'failed' && index === state.cursor) return 'failed';
  if (running) return undoing ? 'stopped' : 'running';
  return 'not_run';
}

/** Every action of the plan, in order, with what became of it. */
export function actionOutcomes(state: MigrationState): ActionOutcomeEntry[] {
  return state.spec.plan.actions.map((a, i) => ({ id: a.id, outcome: actionOutcome(state, i) }));
}
