/**
 * The loop that hosts the step function, as both hosts run it: the local runner
 * (engine/runner/local-runner.ts: a journal, driver calls in this process) and the Temporal
 * migration workflow (engine/temporal/migration-workflow.ts: activities and timers). An event comes
 * in (a command's result, an operator's verb, a resolve), the step function gives the next state,
 * and the host carries out what it asks, always in this order: log the notices, cancel, then issue
 * the commands. The hosts differ only in how they do each of those, which they pass in.
 * Pure and deterministic (no Node API): the workflow bundle imports it, and a change of the order
 * here is a change of the workflow's commands (test/temporal/replay.test.ts).
 */
import { step } from './step.js';
import type {
  Command,
  LogLine,
  MigrationEvent,
  MigrationState,
  ResolveHow,
  Transition,
  Verb,
  VerbOptions,
} from './types.js';

/** What a host does with a transition's effects. */
export interface StepHost {
  log(line: LogLine): void;
  /** Aborts a command in flight (a pause or rollback interrupting a wait or a gate). */
  cancel(commandId: string): void;
  issue(command: Command): void;
  /**
   * Asked after the cancellations, before the commands: true holds the new commands back (they stay
   * in `state.inflight`; the workflow issues them in its next run after a continue-as-new).
   */
  holdCommands?(state: MigrationState): boolean;
}

/** Steps `state` by `event` and carries the transition out through `host`; the new state. */
export function hostEvent(state: MigrationState, event: MigrationEvent, host: StepHost): MigrationState {
  const t = step(state, event);
  carryOut(t, host);
  return t.state;
}

/** Carries a transition's effects out, in the one order both hosts keep. */
export function carryOut(t: Transition, host: StepHost): void {
  for (const notice of t.notices) host.log({ ...notice });
  for (const id of t.cancels) host.cancel(id);
  if (host.holdCommands?.(t.state)) return;
  for (const command of t.commands) host.issue(command);
}

/**
 * Picking a migration up where it stands (a new runner after a crash, a workflow's next run):
 * every call in flight is issued again (drivers are idempotent), then each one that was being
 * cancelled ends as cancelled. Calls first: recording a cancellation may issue new commands.
 */
export function pickUp(
  state: MigrationState,
  host: { issue(command: Command): void; record(event: MigrationEvent): void },
  now: () => number,
): void {
  const cancelling = state.inflight.filter((c) => state.cancelling.includes(c.id));
  for (const command of state.inflight) if (!cancelling.includes(command)) host.issue(command);
  for (const command of cancelling) {
    host.record({ type: 'command_cancelled', at: now(), commandId: command.id, elapsedMs: 0 });
  }
}

/** The event of an operator's verb. */
export function operatorEvent(verb: Verb, at: number, by?: string, options?: VerbOptions): MigrationEvent {
  const event: MigrationEvent = { type: 'operator', at, verb };
  if (by !== undefined) event.by = by;
  if (verb === 'promote' && options?.full) event.full = true;
  return event;
}

/** The event of a person resolving undo steps left for them (all, or `step`). */
export function resolveEvent(how: ResolveHow, at: number, stepId?: string, by?: string): MigrationEvent {
  const event: MigrationEvent = { type: 'resolve', at, how };
  if (stepId !== undefined) event.step = stepId;
  if (by !== undefined) event.by = by;
  return event;
}
