import { retryBackoffMs } from './commands.js';
import { lowerBound } from './plan-index.js';
import type { ActionRun, Command, MigrationState, Notice, Transition } from './types.js';

/**
 * What the step function's parts share to build a transition: the notices it says, the commands it
 * numbers and puts in flight, and the bookkeeping of the actions running. Each takes the transition
 * being built and changes it; none reads a clock or does I/O.
 */

export function transition(state: MigrationState): Transition {
  return { state, commands: [], cancels: [], notices: [] };
}

/**
 * What one lifecycle state did when advanced: `settled` (a command is in flight, or the state waits
 * for an event or a verb), or `again` (it moved to a state that may advance at once).
 */
export type Advanced = 'settled' | 'again';

/** The action whose command (driver call or retry wait) this is, if any. */
export function runOf(s: MigrationState, commandId: string): ActionRun | undefined {
  return s.running.find((r) => r.command === commandId);
}

export function setRun(t: Transition, run: ActionRun): void {
  t.state = { ...t.state, running: t.state.running.map((r) => (r.index === run.index ? run : r)) };
}

/** The action of `run` is done: it leaves `running`, joins `done`, and the cursor moves past what is done. */
export function finishRun(t: Transition, index: number): void {
  const s = t.state;
  const done = [...s.done];
  done.splice(lowerBound(done, index), 0, index);
  // Every index below the cursor is done, so done[cursor] === cursor exactly when the cursor's is.
  let cursor = s.cursor;
  while (done[cursor] === cursor) cursor++;
  t.state = { ...s, running: s.running.filter((r) => r.index !== index), done, cursor };
}

/** An action's command ended after the rollback began: the action will not go on. */
export function detachRun(t: Transition, commandId: string): void {
  const run = runOf(t.state, commandId);
  if (run) setRun(t, { ...run, command: null });
}

/** A command of no action failed: wait, then it is issued again (attempt counted on the state). */
export function retryLater(t: Transition, attempt: number): void {
  t.state = { ...t.state, attempt: attempt + 1 };
  issue(t, { kind: 'wait', ms: retryBackoffMs(attempt), purpose: 'retry' });
}

/** An action's call failed: its wait before the retry is the action's command in flight. */
export function retryRunLater(t: Transition, run: ActionRun, attempt: number): void {
  setRun(t, { ...run, attempt: attempt + 1 });
  issue(t, { kind: 'wait', ms: retryBackoffMs(attempt), purpose: 'retry' }, run.index);
}

/** Numbers a command and puts it in flight; `runIndex` names the action it belongs to. */
export function issue(t: Transition, command: Omit<Command, 'id'> | Command, runIndex?: number): void {
  const s = t.state;
  const withId = { ...command, id: `c${s.nextCommand}` } as Command;
  const running =
    runIndex === undefined
      ? s.running
      : s.running.map((r) => (r.index === runIndex ? { ...r, command: withId.id } : r));
  t.state = { ...s, inflight: [...s.inflight, withId], nextCommand: s.nextCommand + 1, running };
  t.commands.push(withId);
}

export function notice(
  t: Transition,
  at: number,
  kind: Notice['kind'],
  level: Notice['level'],
  message: string,
  stage?: Notice['stage'],
  actionId?: string,
): void {
  const n: Notice = { at, kind, level, message };
  if (stage !== undefined) n.stage = stage;
  if (actionId !== undefined) n.actionId = actionId;
  t.notices.push(n);
}
