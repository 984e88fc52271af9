import { assertNever } from '../errors.js';
import type { Lifecycle, MigrationState, Verb } from './types.js';

/**
 * Which operator verb each lifecycle state allows: one table, shown in docs/migrating.md and checked
 * against the code by a test. `null` means allowed; otherwise the reason it is refused.
 */
export const verbTable: Record<Lifecycle, Record<Verb, string | null>> = {
  running: {
    pause: null,
    resume: 'it is not paused',
    rollback: null,
    cancel: null,
    commit: 'it is not awaiting commit',
    promote: 'it is not awaiting promotion (no shift step with hold: manual is waiting)',
  },
  paused: {
    pause: 'it is already paused',
    resume: null,
    rollback: null,
    cancel: null,
    commit: 'it is not awaiting commit',
    promote: 'it is paused, not awaiting promotion',
  },
  awaiting_promotion: {
    pause: 'it is waiting for promotion; there is nothing to pause',
    resume: 'it is not paused (it awaits promote)',
    rollback: null,
    cancel: null,
    commit: 'it is awaiting promotion: promote it (--full for straight to 100 %) before the commit',
    promote: null,
  },
  awaiting_commit: {
    pause: 'it is waiting for commit; there is nothing to pause',
    resume: 'it is not paused',
    rollback: null,
    cancel: null,
    commit: null,
    promote: 'it is awaiting commit: every shift step is done',
  },
  committing: {
    pause: 'it is committing',
    resume: 'it is not paused',
    rollback: 'the commit has started: it is past the point of no return',
    cancel: 'the commit has started: it is past the point of no return',
    commit: 'it is already committing',
    promote: 'it is committing',
  },
  rolling_back: {
    pause: 'it is rolling back',
    resume: 'it is rolling back',
    rollback: 'it is already rolling back',
    cancel: 'it is already rolling back',
    commit: 'it is rolling back',
    promote: 'it is rolling back',
  },
  completed: {
    pause: 'it has completed',
    resume: 'it has completed',
    rollback: 'it is committed',
    cancel: 'it is committed',
    commit: 'it is already committed',
    promote: 'it has completed',
  },
  rolled_back: {
    pause: 'it was rolled back',
    resume: 'it was rolled back',
    rollback: 'it was already rolled back',
    cancel: 'it was rolled back',
    commit: 'it was rolled back',
    promote: 'it was rolled back',
  },
  cancelled: {
    pause: 'it was cancelled',
    resume: 'it was cancelled',
    rollback: 'it was cancelled (and rolled back)',
    cancel: 'it was already cancelled',
    commit: 'it was cancelled',
    promote: 'it was cancelled',
  },
  failed: {
    pause: 'it failed',
    resume: 'it failed',
    rollback: 'it failed and was rolled back automatically',
    cancel: 'it failed and was rolled back automatically',
    commit: 'it failed',
    promote: 'it failed',
  },
};

/** The refusal for a verb in the current state, as one sentence, or null when it is allowed. */
export function refuseVerb(state: MigrationState, verb: Verb): string | null {
  // A pause that has not taken effect yet can be withdrawn.
  if (verb === 'resume' && state.lifecycle === 'running' && state.pauseRequested) return null;
  if (verb === 'pause' && state.lifecycle === 'running' && state.pauseRequested) {
    return `cannot pause ${state.spec.id}: a pause is already requested (it takes effect after the current step)`;
  }
  const reason = verbTable[state.lifecycle][verb];
  if (reason === null) return null;
  const when = whenOf(state);
  return `cannot ${verbText(verb)} ${state.spec.id}: ${reason}${when}`;
}

function whenOf(state: MigrationState): string {
  if (state.lifecycle === 'completed' && state.committedAt !== null)
    return ` (committed at ${clock(state.committedAt)})`;
  if (state.lifecycle === 'committing' && state.committedAt !== null)
    return ` (commit started at ${clock(state.committedAt)})`;
  if (state.endedAt !== null) return ` (ended at ${clock(state.endedAt)})`;
  return '';
}

/** 12:04:31 in UTC, the way operators read a log line. */
export function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

export function verbText(verb: Verb): string {
  switch (verb) {
    case 'pause':
      return 'pause';
    case 'resume':
      return 'resume';
    case 'rollback':
      return 'roll back';
    case 'cancel':
      return 'cancel';
    case 'commit':
      return 'commit';
    case 'promote':
      return 'promote';
    default:
      return assertNever(verb, 'verb');
  }
}

/**
 * Every change of lifecycle state, and what causes it. docs/migrating.md shows this table; a test drives
 * the step function through random histories and checks that it makes no change missing here.
 */
export const lifecycleTransitions: readonly { from: Lifecycle; to: Lifecycle; on: string }[] = [
  { from: 'running', to: 'paused', on: 'pause (at the next step boundary)' },
  { from: 'running', to: 'awaiting_commit', on: 'last step before commit done, bake over, commit: manual' },
  { from: 'running', to: 'committing', on: 'last step before commit done, bake over, commit: auto' },
  {
    from: 'running',
    to: 'rolling_back',
    on: 'rollback, cancel, a step failed (after retries), an analysis breached, a hook failed, or green lost its health after its gate',
  },
  {
    from: 'running',
    to: 'awaiting_promotion',
    on: 'a shift step with hold: manual reached, nothing else in flight',
  },
  { from: 'awaiting_promotion', to: 'running', on: 'promote (the next step, or --full: 100 %)' },
  { from: 'awaiting_promotion', to: 'rolling_back', on: 'rollback or cancel' },
  { from: 'paused', to: 'running', on: 'resume' },
  { from: 'paused', to: 'rolling_back', on: 'rollback or cancel' },
  { from: 'awaiting_commit', to: 'committing', on: 'commit' },
  { from: 'awaiting_commit', to: 'rolling_back', on: 'rollback or cancel' },
  {
    from: 'committing',
    to: 'completed',
    on: 'layout recorded, blue retired (commit steps retry until done)',
  },
  { from: 'rolling_back', to: 'rolled_back', on: 'undo steps done, after rollback' },
  { from: 'rolling_back', to: 'cancelled', on: 'undo steps done, after cancel' },
  { from: 'rolling_back', to: 'failed', on: 'undo steps done, after a failed step' },
  { from: 'rolled_back', to: 'rolling_back', on: 'resolve --retry of undo steps left for a person' },
  { from: 'cancelled', to: 'rolling_back', on: 'resolve --retry of undo steps left for a person' },
  { from: 'failed', to: 'rolling_back', on: 'resolve --retry of undo steps left for a person' },
];
