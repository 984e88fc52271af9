import { isFinal, type MigrationState } from './types.js';

/** What a listing shows of one migration, the same in every mode (local, Temporal, a server). */
export interface MigrationSummary {
  id: string;
  environment: string;
  lifecycle: MigrationState['lifecycle'];
  /** running, paused…; with the stage or the reason. */
  status: string;
  planId: string;
  actionsDone: number;
  actionsTotal: number;
  startedAt: number;
  updatedAt: number;
  committedAt: number | null;
  endedAt: number | null;
  reason: string | null;
  /** pid of the live process driving it, if any. */
  runnerPid: number | null;
  /**
   * Set when the journal cannot be read: the problem, naming the file and what to do. Such a
   * migration is listed as `failed` with status `unreadable` (nothing else about it is known).
   */
  unreadable?: string;
}

/** The summary of a migration's state; `runnerPid`: the process driving it, where one is known. */
export function summaryOf(state: MigrationState, runnerPid: number | null): MigrationSummary {
  return {
    id: state.spec.id,
    environment: state.spec.environment,
    lifecycle: state.lifecycle,
    status: describeLifecycle(state),
    planId: state.spec.plan.planId,
    actionsDone: Math.min(state.cursor, state.spec.plan.actions.length),
    actionsTotal: state.spec.plan.actions.length,
    startedAt: state.startedAt,
    updatedAt: state.updatedAt,
    committedAt: state.committedAt,
    endedAt: state.endedAt,
    reason: state.ending?.reason ?? null,
    runnerPid,
  };
}

export function describeLifecycle(state: MigrationState): string {
  const action = state.spec.plan.actions[state.cursor];
  switch (state.lifecycle) {
    case 'running':
      return state.pauseRequested
        ? `pausing (${action?.id ?? 'commit'})`
        : `running (${action?.stage === 'commit' || !action ? 'bake' : action.stage})`;
    case 'paused':
      return `paused (before ${action?.id ?? 'commit'})`;
    case 'committing':
      return 'committing';
    case 'rolling_back':
      return `rolling back (${state.ending?.reason ?? ''})`;
    case 'failed':
      return `failed: ${state.ending?.reason ?? 'unknown reason'}`;
    default:
      return state.lifecycle.replace('_', ' ');
  }
}

/** In-flight migrations first, then history, newest first: the last 10, or all. */
export function listSelection(all: MigrationSummary[], everything: boolean): MigrationSummary[] {
  const inFlight = all.filter((m) => !isFinal(m.lifecycle));
  const history = all.filter((m) => isFinal(m.lifecycle));
  return [...inFlight, ...(everything ? history : history.slice(0, 10))];
}
