import type { VerdictOutcome } from '../analysis/verdict.js';
import type { ReplicationFigure } from './replication-lag.js';
import { type CommitOrigin, isFinal, type MigrationState, type RolledBackTo } from './types.js';

function lastAnalysis(state: MigrationState): Pick<MigrationSummary, 'analysis'> {
  const last = state.analyses?.at(-1);
  return last ? { analysis: { outcome: last.outcome, weight: last.weight, reason: last.reason } } : {};
}

/** What a listing shows of one migration, the same in every mode (local, Temporal, a server). */
export interface MigrationSummary {
  id: string;
  environment: string;
  lifecycle: MigrationState['lifecycle'];
  /** running, paused…; with the stage or the reason. */
  status: string;
  planId: string;
  /** Who started it: a server's token name, or the OS user; null when not recorded (older migrations). */
  startedBy: string | null;
  /** The Git commit its topology came from; null when unknown. */
  commit: string | null;
  /** Where `commit` came from; null when unknown. */
  commitFrom: CommitOrigin | null;
  /** HEAD of the work tree it was applied from, when that held the very text applied; null when unknown. */
  appliedCommit: string | null;
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
   * A migration made by `cutover topology rollback --to`: the recorded layout it goes back to (its
   * serial, and the migration that recorded it when one did). Absent for a forward migration.
   */
  rolledBackTo?: RolledBackTo;
  /** The last analysis of a shift hold, when one ran (every one is in the state's `analyses`). */
  analysis?: { outcome: VerdictOutcome; weight: number; reason: string };
  /**
   * While it is in flight: the replication lag of each switched component as its health gate last
   * measured it (core/migration/replication-lag.ts), when one was measured. Local mode only.
   */
  replication?: ReplicationFigure[];
  /**
   * Whether a process drives it, read when asked: `alive`; `dead` (in flight, and the process that
   * drove it is gone: `resumeWith` picks it up); `starting` (just created, its runner not up yet);
   * `none` (it has ended, or its mode has no runner process: Temporal).
   */
  runner: RunnerState;
  /** With `runner: 'dead'`: the command that resumes it, exactly. */
  resumeWith?: string;
  /** With `runner: 'dead'`: the pid of the runner that died, when its record named one. */
  deadRunnerPid?: number;
  /**
   * Set when the journal cannot be read: the problem, naming the file and what to do. Such a
   * migration is listed as `failed` with status `unreadable` (nothing else about it is known).
   */
  unreadable?: string;
}

export type RunnerState = 'alive' | 'dead' | 'starting' | 'none';

/** What was found of the process driving a migration, when asked. */
export type RunnerSeen =
  | { state: 'alive'; pid: number }
  /** pid: the one its record names (null when it left none); resumeWith: the command that resumes it. */
  | { state: 'dead'; pid: number | null; resumeWith: string }
  | { state: 'starting' }
  | { state: 'none' };

/** The summary of a migration's state; `runner`: what drives it, where a mode has runner processes. */
export function summaryOf(state: MigrationState, runner: RunnerSeen = { state: 'none' }): MigrationSummary {
  const dead = runner.state === 'dead' ? runner : null;
  return {
    id: state.spec.id,
    environment: state.spec.environment,
    lifecycle: state.lifecycle,
    status: describeLifecycle(state) + (dead ? deadRunnerNote(dead.pid, dead.resumeWith) : ''),
    planId: state.spec.plan.planId,
    startedBy: state.spec.startedBy ?? null,
    commit: state.spec.commit ?? null,
    commitFrom: state.spec.commitFrom ?? null,
    appliedCommit: state.spec.appliedCommit ?? null,
    actionsDone: state.done.length,
    actionsTotal: state.spec.plan.actions.length,
    startedAt: state.startedAt,
    updatedAt: state.updatedAt,
    committedAt: state.committedAt,
    endedAt: state.endedAt,
    reason: state.ending?.reason ?? null,
    runnerPid: runner.state === 'alive' ? runner.pid : null,
    runner: runner.state,
    ...(state.spec.rolledBackTo === undefined ? {} : { rolledBackTo: { ...state.spec.rolledBackTo } }),
    ...lastAnalysis(state),
    ...(dead ? { resumeWith: dead.resumeWith } : {}),
    ...(dead && dead.pid !== null ? { deadRunnerPid: dead.pid } : {}),
  };
}

const deadRunnerMark = ' — runner died';

/** What a status adds when the runner died: " — runner died (pid 1234); resume: cutover …". */
export function deadRunnerNote(pid: number | null, resumeWith: string): string {
  return `${deadRunnerMark}${pid === null ? '' : ` (pid ${pid})`}; resume: ${resumeWith}`;
}

/** A status without the dead runner's note: the lifecycle in words. */
export function lifecycleStatus(summary: MigrationSummary): string {
  const at = summary.status.indexOf(deadRunnerMark);
  return at < 0 ? summary.status : summary.status.slice(0, at);
}

/**
 * The same summary (or a status's migration in flight), its resume command given as `resumeWith`
 * (a client of a server reaches the migration with other options than the server's own state
 * directory).
 */
export function withResumeCommand<S extends Pick<MigrationSummary, 'status' | 'runner' | 'resumeWith'>>(
  summary: S,
  resumeWith: string,
): S {
  if (summary.runner !== 'dead' || summary.resumeWith === undefined) return summary;
  return { ...summary, status: summary.status.replace(summary.resumeWith, resumeWith), resumeWith };
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
    // With its reason, as a failure has: "rolled back: analysis failed: green 5xx …".
    case 'rolled_back':
    case 'cancelled':
      return state.ending?.reason
        ? `${state.lifecycle.replace('_', ' ')}: ${state.ending.reason}`
        : state.lifecycle.replace('_', ' ');
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
