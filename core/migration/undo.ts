import { assertNever } from '../errors.js';
import { isAbortedOnEnding, retryBackoffMs, sinceFormat12, undoSteps } from './commands.js';
import { lowerBound, sortedHas } from './plan-index.js';
import { describeCommand, isRouteCommand, parallelismOf } from './queries.js';
import { isSwitchBackStep, keepGreenServing } from './switch.js';
import { type Advanced, detachRun, notice, retryLater } from './transition.js';
import type { Command, Ending, MigrationState, Outcome, SkippedStep, Transition, UndoRun } from './types.js';
import { undoPrerequisites } from './undo-order.js';

/** Attempts of one undo step before it is skipped and left for a person. */
export const maxAttemptsPerUndoStep = 5;

/**
 * Starts a rollback (operator, cancel or failure): plans the undo steps and runs them. `reason` is
 * how the migration will have ended; `cause` opens the notice (a failure's reason was just given in
 * its own notice, gate_failed or action_failed, so it has none).
 */
export function beginEnding(
  t: Transition,
  at: number,
  outcome: Outcome,
  reason: string,
  cause?: string,
): void {
  const s = t.state;
  const { steps, next } = numberedUndoSteps(s);
  t.state = {
    ...s,
    lifecycle: 'rolling_back',
    pauseRequested: false,
    attempt: 1,
    nextCommand: next,
    ending: {
      outcome,
      reason,
      steps,
      cursor: 0,
      skipped: [],
      ...(sinceFormat12(s) ? { finished: [], running: [] } : {}),
    },
  };
  // What is in flight is stopped where that leaves nothing half done (waits, probes, drains); after a
  // failure or an operator's rollback or cancel, calls standing green up are aborted too (the undo
  // retires what they may have started). The undo steps start once nothing is in flight any more.
  const cancel = s.inflight
    .filter((c) => isAbortedOnEnding(c) && !s.cancelling.includes(c.id))
    .map((c) => c.id);
  t.state.cancelling = [...s.cancelling, ...cancel];
  t.cancels.push(...cancel);
  notice(
    t,
    at,
    'rollback_started',
    outcome === 'failed' ? 'error' : 'warn',
    `${cause ? `${cause}; ` : ''}rolling back: ${describeUndo(steps)}${restartsKept(s)}`,
  );
}

/** The steps that undo what the migration did so far, with their command ids, and the next id. */
function numberedUndoSteps(s: MigrationState): { steps: Command[]; next: number } {
  const steps = undoSteps(s).map((command) => ({ ...command, id: '' }) as Command);
  let next = s.nextCommand;
  for (const command of steps) command.id = `c${next++}`;
  return { steps, next };
}

/**
 * The release of a switch to green was in flight when the rollback began: a route change is not cut
 * short, so it went live, and green has taken writes since (the held requests first). The undo was
 * planned before, without a switch back; none of its steps has started (they wait for what was in
 * flight), so it is planned again: green's writes go back to blue before the routes do.
 */
function replanAfterRelease(t: Transition, at: number): void {
  const s = t.state;
  const ending = s.ending as Ending;
  if (s.switch?.direction !== 'to_green' || !s.switch.released) return;
  if (ending.steps.some((c) => c.kind === 'hold_routes')) return;
  const started =
    ending.cursor > 0 || (ending.finished ?? []).length > 0 || (ending.running ?? []).length > 0;
  if (started) return;
  const { steps, next } = numberedUndoSteps(s);
  t.state = { ...s, nextCommand: next, ending: { ...ending, steps } };
  notice(
    t,
    at,
    'rollback_step',
    'warn',
    `the release to green went live before the rollback could stop it, and green takes writes: the rollback switches back first (hold, fence green, blue catches up, promote blue), then ${describeUndo(steps)}`,
  );
}

/** A restart in place already issued is not undone (see undoSteps): say so. */
export function restartsKept(s: MigrationState): string {
  const actions = s.spec.plan.actions;
  const started = [...s.done, ...s.running.map((r) => r.index)];
  const issued = started.some((i) => actions[i]?.type === 'restart');
  return issued ? ' (replicas restarted in place were down before; they stay)' : '';
}

/** What a rollback will do, in the order it does it. */
export function describeUndo(steps: readonly Command[]): string {
  const routes = steps.some((c) => isRouteCommand(c));
  const green = steps.some((c) => c.kind === 'retire');
  if (routes && green) return 'routes back to blue first, then green retired';
  if (routes) return 'routes back to blue';
  if (green) return 'green retired (no traffic had moved to it)';
  return 'nothing to undo';
}

/** Rolling back (or ending another way): the next undo step, then the outcome. Waits while cancelling. */
export function advanceRollingBack(t: Transition, at: number): Advanced {
  const s = t.state;
  const ending = s.ending as NonNullable<MigrationState['ending']>;
  if (ending.running) {
    if (scheduleUndo(t)) return 'settled';
  } else {
    // Undo steps run one at a time, once what was in flight when the rollback began has ended.
    if (s.inflight.length > 0) return 'settled';
    const next = ending.steps[ending.cursor];
    if (next) {
      t.state = { ...s, inflight: [next] };
      t.commands.push(next);
      return 'settled';
    }
  }
  t.state = { ...t.state, lifecycle: ending.outcome, endedAt: at };
  const left = ending.skipped.filter((step) => step.resolved === undefined);
  const incomplete =
    left.length > 0
      ? `; undo steps that failed: ${left.map((step) => `${step.what}: ${step.error}`).join('; ')}`
      : '';
  const level = ending.outcome === 'failed' || incomplete ? 'error' : 'info';
  // A route whose undo failed may still send traffic to green (or nowhere): blue serving is then
  // not known, and the last line of the log must not say it is.
  const routeLeft = left.some((step) => isRouteCommand(step.command));
  // A first deployment has no blue: nothing served before, and nothing serves after.
  const hadBlue = Object.keys(t.state.spec.base.topology?.components ?? {}).length > 0;
  const serving = !hadBlue
    ? 'nothing is serving: the environment had no layout before (a first deployment)'
    : routeLeft
      ? 'blue may not be serving: not every route is back on it'
      : 'blue is serving';
  notice(
    t,
    at,
    'ended',
    level,
    `${ending.outcome.replace('_', ' ')}: ${serving} (${ending.reason})${incomplete}`,
  );
  return 'settled';
}

/**
 * Undo steps as a graph (format 1.2): once the calls in flight when the rollback began have ended,
 * issues every step whose prerequisites (undo-order.ts) are finished, up to the parallelism, in
 * step order; a step whose retry wait is over is issued again first. False once every step is
 * finished (the ending is over); true while something is in flight or waits.
 */
export function scheduleUndo(t: Transition): boolean {
  const ending = t.state.ending as Ending;
  const running = ending.running as UndoRun[];
  const finished = ending.finished as number[];
  const undoCommands = new Set(running.map((r) => r.command));
  if (t.state.inflight.some((c) => !undoCommands.has(c.id))) return true;
  if (finished.length === ending.steps.length) return false;
  const limit = parallelismOf(t.state.spec);
  const issueStep = (run: UndoRun) => {
    const command = ending.steps[run.index] as Command;
    t.state = { ...t.state, inflight: [...t.state.inflight, command] };
    t.commands.push(command);
    return { ...run, command: command.id };
  };
  let runs = running.map((run) =>
    run.command === null && t.state.inflight.length < limit ? issueStep(run) : run,
  );
  const prerequisites = undoPrerequisites(ending.steps, t.state.spec.desired);
  const isFinished = (i: number) => sortedHas(finished, i);
  for (let i = ending.cursor; i < ending.steps.length && t.state.inflight.length < limit; i++) {
    if (isFinished(i) || runs.some((r) => r.index === i)) continue;
    if (!(prerequisites[i] ?? []).every(isFinished)) continue;
    runs = [...runs, issueStep({ index: i, attempt: 1, command: null })];
  }
  t.state = { ...t.state, ending: { ...(t.state.ending as Ending), running: runs } };
  return true;
}

/**
 * Where an undo step runs: one at a time at the ending's cursor, with the state's attempt (plans
 * before format 1.2), or as a run of the graph, with its own attempt. The results of undo steps are
 * taken the same way in both (below); only where the step stands, and how it waits to try again or
 * makes way for the next, differ.
 */
type UndoPlace = { engine: 'sequence' } | { engine: 'graph'; run: UndoRun };

/**
 * The undo step a result is for: the step, or (graph) the wait before retrying it. Null for a call
 * that was in flight when the rollback began, and for the sequence's retry wait (once it has ended,
 * advanceRollingBack issues the step again).
 */
function undoPlaceOf(ending: Ending, commandId: string): UndoPlace | null {
  if (!ending.running) return ending.steps[ending.cursor]?.id === commandId ? { engine: 'sequence' } : null;
  const run = ending.running.find((r) => r.command === commandId);
  return run ? { engine: 'graph', run } : null;
}

/** An undo step (or a call in flight when the rollback began) succeeded. */
export function undoSucceeded(t: Transition, command: Command, at: number): void {
  const ending = t.state.ending as Ending;
  const place = undoPlaceOf(ending, command.id);
  if (!place) {
    // An action that was in flight when the rollback began finished; its effect is undone by the
    // steps (planned again when it was the release of a switch, which went live).
    detachRun(t, command.id);
    replanAfterRelease(t, at);
    return;
  }
  if (place.engine === 'graph' && command.kind === 'wait') {
    // The wait before a retry is over: the step is issued again.
    setUndoRun(t, { ...place.run, command: null });
    return;
  }
  notice(t, at, 'rollback_step', 'info', `undo: ${describeCommand(command)} done`);
  // A step a person asked to retry is resolved once it succeeds.
  const skipped = ending.skipped.map((entry): SkippedStep => {
    if (entry.retrying?.as !== command.id) return entry;
    const { retrying, ...rest } = entry;
    return { ...rest, resolved: { how: 'retried', at, ...(retrying.by ? { by: retrying.by } : {}) } };
  });
  finishUndoStep(t, place, skipped);
}

/**
 * An undo step (or a call in flight when the rollback began) failed: it waits and is tried again,
 * up to maxAttemptsPerUndoStep attempts; then it is skipped and left for a person.
 */
export function undoFailed(
  t: Transition,
  command: Command,
  at: number,
  message: string,
  retryable: boolean,
): void {
  const ending = t.state.ending as Ending;
  const place = undoPlaceOf(ending, command.id);
  if (!place) {
    detachRun(t, command.id); // an interrupted action failed: its undo step is already planned
    return;
  }
  const attempt = place.engine === 'graph' ? place.run.attempt : t.state.attempt;
  if (place.engine === 'graph' && command.kind === 'wait') {
    retryUndoStep(t, place, attempt); // the wait itself failed: wait again, the attempt not counted
    return;
  }
  const what = describeCommand(command);
  // A failure that says trying again cannot help (the write hold's budget ran out, a driver that
  // cannot do it) goes to a person at once: retries would fail alike, and hold writes meanwhile.
  if (retryable && attempt < maxAttemptsPerUndoStep) {
    notice(t, at, 'action_retry', 'warn', `undo: ${what} failed (${message}); retrying`);
    retryUndoStep(t, place, attempt + 1);
    return;
  }
  notice(
    t,
    at,
    'action_failed',
    'error',
    retryable
      ? `undo: ${what} failed ${attempt} times (${message}); skipped, needs a person`
      : `undo: ${what} failed (${message}); trying again would not help: skipped, needs a person`,
  );
  // A retried step that fails again is left for a person again: the same entry, not a second one.
  const again = ending.skipped.some((entry) => entry.retrying?.as === command.id);
  if (!again && isSwitchBackStep(t.state, command) && place.engine === 'graph') {
    finishUndoStep(t, place, [...ending.skipped, { command, what, error: message }]);
    abandonSwitchBack(t, at, message);
    return;
  }
  const skipped = again
    ? ending.skipped.map((entry): SkippedStep => {
        if (entry.retrying?.as !== command.id) return entry;
        const { retrying: _retrying, ...rest } = entry;
        return { ...rest, error: message };
      })
    : [...ending.skipped, { command, what, error: message }];
  finishUndoStep(t, place, skipped);
}

/**
 * The switch back to blue failed for good: green still has writes blue may lack, so nothing that
 * assumes blue caught up may run (routes back to blue, green retired). Those steps are left for a
 * person (`resolve --retry` runs the switch back again), and green is made to serve again: unfenced,
 * its routes at 100 % without the hold, which releases what it held to green.
 */
function abandonSwitchBack(t: Transition, at: number, message: string): void {
  const ending = t.state.ending as Ending;
  const finished = [...(ending.finished as number[])];
  const running = new Set((ending.running as UndoRun[]).map((r) => r.index));
  const skipped = [...ending.skipped];
  const error = `not run: the switch back to blue failed (${message}); green keeps the writes and serves`;
  ending.steps.forEach((step, i) => {
    if (sortedHas(finished, i) || running.has(i)) return;
    skipped.push({ command: step, what: describeCommand(step), error });
    finished.splice(lowerBound(finished, i), 0, i);
  });
  let next = t.state.nextCommand;
  const extra = keepGreenServing(t.state).map((step) => ({ ...step, id: `c${next++}` }) as Command);
  const steps = [...ending.steps, ...extra];
  let cursor = ending.cursor;
  while (finished[cursor] === cursor) cursor++;
  t.state = {
    ...t.state,
    nextCommand: next,
    ending: { ...ending, steps, finished, cursor, skipped },
  };
  notice(
    t,
    at,
    'rollback_step',
    'error',
    `undo: the switch back to blue failed (${message}); green serves again and keeps the writes; the rest of the rollback needs a person`,
  );
}

/** The step waits (the backoff of the attempt it is at), then runs again as attempt `next`. */
function retryUndoStep(t: Transition, place: UndoPlace, next: number): void {
  switch (place.engine) {
    case 'sequence':
      // A wait of no action, the attempt counted on the state (`next`); once the wait ends,
      // advanceRollingBack issues the step at the cursor again.
      retryLater(t, next - 1);
      return;
    case 'graph': {
      const wait = {
        id: `c${t.state.nextCommand}`,
        kind: 'wait',
        ms: retryBackoffMs(place.run.attempt),
        purpose: 'retry',
      } as const;
      t.state = { ...t.state, inflight: [...t.state.inflight, wait], nextCommand: t.state.nextCommand + 1 };
      t.commands.push(wait);
      setUndoRun(t, { ...place.run, attempt: next, command: wait.id });
      return;
    }
    default:
      assertNever(place, 'undo place');
  }
}

/** The step is finished (done, or left for a person): the steps after it may go. */
function finishUndoStep(t: Transition, place: UndoPlace, skipped: SkippedStep[]): void {
  const ending = t.state.ending as Ending;
  switch (place.engine) {
    case 'sequence':
      t.state = { ...t.state, attempt: 1, ending: { ...ending, cursor: ending.cursor + 1, skipped } };
      return;
    case 'graph': {
      // It leaves `running` and joins `finished`; the cursor moves past what is finished.
      const finished = [...(ending.finished as number[])];
      finished.splice(lowerBound(finished, place.run.index), 0, place.run.index);
      let cursor = ending.cursor;
      while (finished[cursor] === cursor) cursor++;
      const running = (ending.running as UndoRun[]).filter((r) => r.index !== place.run.index);
      t.state = { ...t.state, ending: { ...ending, running, finished, cursor, skipped } };
      return;
    }
    default:
      assertNever(place, 'undo place');
  }
}

/** The graph's run of an undo step, changed. */
function setUndoRun(t: Transition, run: UndoRun): void {
  const ending = t.state.ending as Ending;
  const running = (ending.running as UndoRun[]).map((r) => (r.index === run.index ? run : r));
  t.state = { ...t.state, ending: { ...ending, running } };
}
