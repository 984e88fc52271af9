import { assertNever } from '../errors.js';
import type { Action } from '../plan/types.js';
import { isCancellable, shiftParts } from './commands.js';
import { beginCommit } from './forward.js';
import { describeCommand, isParked } from './queries.js';
import { refuseResolve, stepsToResolve } from './resolve-policy.js';
import { isSwitchCommand, switchBackAgain } from './switch.js';
import { finishRun, notice, setRun } from './transition.js';
import type { Command, MigrationState, ResolveHow, SkippedStep, Transition, Verb } from './types.js';
import { beginEnding } from './undo.js';
import { refuseVerb } from './verb-policy.js';

export function onOperator(t: Transition, verb: Verb, at: number, by?: string, full = false): void {
  const s = t.state;
  // A runner checks verbs before journaling them; one refused here is ignored, never half-applied.
  if (refuseVerb(s, verb) !== null) return;
  const who = by ? ` by ${by}` : '';
  switch (verb) {
    case 'pause': {
      // Waits and probes stop now (a gate goes on later with the deadline it had left); driver
      // calls finish; no new action starts. Paused once nothing is in flight.
      const cancel = s.inflight
        .filter((c) => isCancellable(c) && !s.cancelling.includes(c.id))
        .map((c) => c.id);
      t.state = { ...s, pauseRequested: true, cancelling: [...s.cancelling, ...cancel] };
      t.cancels.push(...cancel);
      if (s.inflight.length > 0)
        notice(t, at, 'paused', 'info', `pause requested${who}; it takes effect after the current step`);
      return;
    }
    case 'resume':
      t.state = { ...s, lifecycle: 'running', pauseRequested: false };
      notice(t, at, 'resumed', 'info', `resumed${who}`);
      return;
    case 'rollback':
      // The reason says why it ends (the outcome is said beside it): "rolling back (rollback requested by …)".
      // Like a failure, it aborts the calls standing green up: the rollback retires what they started.
      beginEnding(t, at, 'rolled_back', `rollback requested${who}`, `rollback requested${who}`);
      return;
    case 'cancel':
      beginEnding(t, at, 'cancelled', `cancel requested${who}`, `cancel requested${who}`);
      return;
    case 'commit':
      beginCommit(t, at, `commit requested${who}`);
      return;
    case 'promote':
      promote(t, at, who, full);
      return;
    default:
      assertNever(verb, 'verb');
  }
}

/**
 * A person resolves undo steps left for them. skip: marked resolved, nothing runs. retry: the
 * steps are issued again as undo steps (fresh ids), so the migration is rolling back again, with
 * the same retries; it ends as it had once they are done (or left again).
 */
export function onResolve(
  t: Transition,
  at: number,
  how: ResolveHow,
  step: string | undefined,
  by?: string,
): void {
  const s = t.state;
  // Checked before journaling, like the verbs; one refused here is ignored.
  if (refuseResolve(s, step) !== null) return;
  const ending = s.ending as NonNullable<MigrationState['ending']>;
  const targets = new Set(stepsToResolve(s, step));
  const who = by ? ` by ${by}` : '';
  if (how === 'skip') {
    const skipped = ending.skipped.map((entry): SkippedStep => {
      if (!targets.has(entry)) return entry;
      notice(t, at, 'rollback_step', 'warn', `undo step ${entry.what} marked resolved${who} (not run again)`);
      return { ...entry, resolved: { how: 'skipped', at, ...(by ? { by } : {}) } };
    });
    t.state = { ...s, ending: { ...ending, skipped } };
    return;
  }
  let next = s.nextCommand;
  // A switch back given up is made afresh first; its own steps left are retried as those.
  const retried: Command[] = switchBackAgain(
    s,
    [...targets].map((entry) => entry.command),
  ).map((step) => ({ ...step, id: `c${next++}` }) as Command);
  const fresh = [...retried];
  const skipped = ending.skipped.map((entry): SkippedStep => {
    if (!targets.has(entry)) return entry;
    const again = isSwitchCommand(entry.command)
      ? fresh.find((c) => sameSwitchStep(c, entry.command))
      : undefined;
    const command = again ?? ({ ...entry.command, id: `c${next++}` } as Command);
    if (!again) retried.push(command);
    return { ...entry, retrying: { as: command.id, ...(by ? { by } : {}) } };
  });
  t.state = {
    ...s,
    lifecycle: 'rolling_back',
    endedAt: null,
    attempt: 1,
    nextCommand: next,
    ending: {
      ...ending,
      steps: [...ending.steps, ...retried],
      cursor: ending.steps.length,
      skipped,
      ...(ending.running ? { running: [] } : {}),
    },
  };
  notice(
    t,
    at,
    'rollback_started',
    'warn',
    `retry of undo steps requested${who}: ${retried.map(describeCommand).join(', ')}`,
  );
}

/**
 * `promote`: the shift waiting at a manual hold goes on, to its next step, or (`full`) straight to
 * its last step (100 %), skipping the steps between.
 */
function promote(t: Transition, at: number, who: string, full: boolean): void {
  const run = t.state.running.find((r) => isParked(t.state, r));
  if (!run) return; // refused before journaling (verb-policy): nothing waits for it
  const action = t.state.spec.plan.actions[run.index] as Action;
  const parts = shiftParts(t.state, action);
  let next = run.subStep + 1;
  if (full) {
    const last = parts.findLastIndex((p) => p.kind === 'weight');
    next = Math.max(next, last);
  }
  t.state = { ...t.state, lifecycle: 'running' };
  notice(
    t,
    at,
    'promoted',
    'info',
    `promoted${who}${full ? ': straight to 100 %, the steps between skipped' : ''}`,
    action.stage,
    action.id,
  );
  if (next >= parts.length) {
    notice(t, at, 'action_succeeded', 'info', `${action.id} done`, action.stage, action.id);
    finishRun(t, run.index);
    return;
  }
  setRun(t, { ...run, subStep: next, attempt: 1, gateRemainingMs: null, command: null });
}

/** The same step of a switch: its kind, and the component and side it acts on. */
function sameSwitchStep(a: Command, b: Command): boolean {
  if (a.kind !== b.kind) return false;
  const side = (c: Command) =>
    'component' in c ? `${c.component}/${'slot' in c ? c.slot : 'from' in c ? c.from : ''}` : '';
  return side(a) === side(b);
}
