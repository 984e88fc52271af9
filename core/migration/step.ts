import { assertNever, InvariantError } from '../errors.js';
import { prerequisites } from '../plan/plan-edges.js';
import type { Action, Stage } from '../plan/types.js';
import { own, setOwn } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { hookFailureRollsBack } from '../topology/hook-types.js';
import { defaults, type Topology } from '../topology/types.js';
import {
  commandFor,
  hookCommand,
  isAbortedOnEnding,
  isCancellable,
  retryBackoffMs,
  shiftParts,
  sinceFormat12,
  undoSteps,
} from './commands.js';
import { lowerBound, planIndex, sortedHas } from './plan-index.js';
import { refuseResolve, stepsToResolve } from './resolve-policy.js';
import type {
  ActionRun,
  AnalysisResult,
  Command,
  Ending,
  MigrationEvent,
  MigrationSpec,
  MigrationState,
  Notice,
  Outcome,
  ResolveHow,
  SkippedStep,
  Transition,
  UndoRun,
  Verb,
} from './types.js';
import { undoPrerequisites } from './undo-order.js';
import { refuseVerb } from './verb-policy.js';

/** Attempts of one driver call before its action fails (transient errors only). */
export const maxAttemptsPerCall = 3;
/** Attempts of one undo step before it is skipped and left for a person. */
export const maxAttemptsPerUndoStep = 5;

/**
 * The migration as a pure state machine: `(state, event) → (state, commands)`. No I/O, no clock:
 * time comes in on events. Both runners (local and Temporal) drive this same function, and a
 * journal replayed through it rebuilds the state exactly.
 *
 * It runs the plan as a graph: an action starts once the actions of its `after` are done, up to
 * `spec.parallelism` commands in flight, in plan order among those ready (so parallelism 1 runs the
 * plan one action at a time, in plan order). After the last action before `commit` it waits the
 * bake time, then commits (auto) or waits for an operator (manual). A failed action stops new
 * starts, aborts what is in flight, then rolls back: traffic back to blue first, then green retired.
 * The state depends on the events only, never on when they arrived: the same journal replays to the
 * same state, and completions of independent actions in any order lead to the same end state.
 */
export function start(spec: MigrationSpec): Transition {
  const state: MigrationState = {
    spec,
    lifecycle: 'running',
    cursor: 0,
    done: [],
    running: [],
    attempt: 1,
    pauseRequested: false,
    inflight: [],
    cancelling: [],
    nextCommand: 1,
    slots: initialSlots(spec),
    touchedRoutes: [],
    provisioned: [],
    bakeRemainingMs: null,
    bakeDone: false,
    layoutRecorded: false,
    routesPromoted: 0,
    ending: null,
    startedAt: spec.createdAt,
    updatedAt: spec.createdAt,
    committedAt: null,
    endedAt: null,
    lastError: null,
  };
  const t = transition(state);
  const n = spec.plan.actions.length;
  notice(
    t,
    spec.createdAt,
    'migration_started',
    'info',
    `migration ${spec.id} started: ${n} action${n === 1 ? '' : 's'}`,
  );
  advance(t, spec.createdAt);
  return t;
}

export function step(previous: MigrationState, event: MigrationEvent): Transition {
  const t = transition({ ...previous, updatedAt: event.at });
  switch (event.type) {
    case 'created':
      throw new InvariantError('a migration is created once');
    case 'operator':
      onOperator(t, event.verb, event.at, event.by, event.full === true);
      break;
    case 'resolve':
      onResolve(t, event.at, event.how, event.step, event.by);
      break;
    case 'command_succeeded': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      onSucceeded(t, command, event.at, event.output, event.analysis);
      break;
    }
    case 'command_failed': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      if (event.error.unhealthy && onGreenLost(t, command, event.at, event.error.message)) break;
      onFailed(t, command, event.at, event.error.message, event.error.retryable);
      break;
    }
    case 'command_cancelled': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      onCancelled(t, command, event.elapsedMs);
      break;
    }
    default:
      assertNever(event, 'event');
  }
  advance(t, event.at);
  return t;
}

/** Rebuilds a state from a journal. */
export function replay(events: readonly MigrationEvent[]): MigrationState {
  const [first, ...rest] = events;
  if (first?.type !== 'created') throw new InvariantError('a journal starts with its created event');
  let state = start(first.spec).state;
  for (const event of rest) state = step(state, event).state;
  return state;
}

function transition(state: MigrationState): Transition {
  return { state, commands: [], cancels: [], notices: [] };
}

function initialSlots(spec: MigrationSpec): MigrationState['slots'] {
  const slots: MigrationState['slots'] = {};
  for (const [name, slot] of Object.entries(spec.base.slots ?? {})) setOwn(slots, name, { blue: slot });
  return slots;
}

/** An in-flight command's result arrived: it is no longer in flight. Null for a command not awaited. */
function takeResult(t: Transition, commandId: string): Command | null {
  const s = t.state;
  const command = s.inflight.find((c) => c.id === commandId);
  if (!command) return null;
  t.state = {
    ...s,
    inflight: s.inflight.filter((c) => c !== command),
    cancelling: s.cancelling.includes(commandId)
      ? s.cancelling.filter((id) => id !== commandId)
      : s.cancelling,
  };
  return command;
}

/** The bound a new migration runs under: `--parallelism`, else the topology's, else the default. */
export function migrationParallelism(desired: Topology, requested?: number): number {
  return requested ?? desired.strategy.parallelism ?? defaults.parallelism;
}

/** How many commands may be in flight at once; 1 for a spec from before the bound existed. */
export function parallelismOf(spec: MigrationSpec): number {
  return Math.max(1, spec.parallelism ?? 1);
}

/** The action whose command (driver call or retry wait) this is, if any. */
function runOf(s: MigrationState, commandId: string): ActionRun | undefined {
  return s.running.find((r) => r.command === commandId);
}

function setRun(t: Transition, run: ActionRun): void {
  t.state = { ...t.state, running: t.state.running.map((r) => (r.index === run.index ? run : r)) };
}

/** The action of `run` is done: it leaves `running`, joins `done`, and the cursor moves past what is done. */
function finishRun(t: Transition, index: number): void {
  const s = t.state;
  const done = [...s.done];
  done.splice(lowerBound(done, index), 0, index);
  // Every index below the cursor is done, so done[cursor] === cursor exactly when the cursor's is.
  let cursor = s.cursor;
  while (done[cursor] === cursor) cursor++;
  t.state = { ...s, running: s.running.filter((r) => r.index !== index), done, cursor };
}

function currentAction(s: MigrationState): Action | undefined {
  return s.spec.plan.actions[s.cursor];
}

/** Index of the first commit-stage action (or the number of actions when there is none). */
export function commitIndex(spec: MigrationSpec): number {
  return planIndex(spec.plan).stageRange.get('commit')?.[0] ?? spec.plan.actions.length;
}

/** The stage a migration is in, for people: the current action's stage, `bake`, or none. */
export function currentStage(s: MigrationState): Stage | 'bake' | null {
  if (s.lifecycle === 'rolling_back' || s.lifecycle === 'awaiting_commit') return null;
  const action = currentAction(s);
  if (s.cursor >= commitIndex(s.spec) && !s.bakeDone && s.lifecycle !== 'committing') return 'bake';
  return action?.stage ?? null;
}

function onOperator(t: Transition, verb: Verb, at: number, by?: string, full = false): void {
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
function onResolve(t: Transition, at: number, how: ResolveHow, step: string | undefined, by?: string): void {
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
  const retried: Command[] = [];
  const skipped = ending.skipped.map((entry): SkippedStep => {
    if (!targets.has(entry)) return entry;
    const command = { ...entry.command, id: `c${next++}` } as Command;
    retried.push(command);
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

function onSucceeded(
  t: Transition,
  command: Command,
  at: number,
  output: unknown,
  analysis?: AnalysisResult,
): void {
  const s = t.state;
  t.state = { ...s, lastError: null };
  recordEffect(t, command, output);
  if (s.lifecycle === 'rolling_back') {
    const ending = s.ending as NonNullable<MigrationState['ending']>;
    if (ending.running) {
      onUndoSucceeded(t, command, at);
      return;
    }
    if (ending.steps[ending.cursor]?.id !== command.id) {
      // An action that was in flight when the rollback began finished; its effect is undone below.
      detachRun(t, command.id);
      return;
    }
    notice(t, at, 'rollback_step', 'info', `undo: ${describeCommand(command)} done`);
    // A step a person asked to retry is resolved once it succeeds.
    const skipped = ending.skipped.map((s): SkippedStep => {
      if (s.retrying?.as !== command.id) return s;
      const { retrying, ...rest } = s;
      return { ...rest, resolved: { how: 'retried', at, ...(retrying.by ? { by: retrying.by } : {}) } };
    });
    t.state = { ...t.state, attempt: 1, ending: { ...ending, cursor: ending.cursor + 1, skipped } };
    return;
  }
  if (s.lifecycle === 'committing' || s.lifecycle === 'running' || s.lifecycle === 'paused') {
    if (command.kind === 'analyze' && onAnalysis(t, command, at, analysis)) return;
    if (command.kind === 'hook') {
      notice(t, at, 'hook_passed', 'info', `hook ${command.name} (${hookWhere(command)}) passed`);
    }
    completeStep(t, command, at);
  }
}

/**
 * An analysis ended: it is kept (status, show, the API) and said in the log. A breach rolls back
 * at once, with the figures in the reason; true then (the step does not go on).
 */
function onAnalysis(
  t: Transition,
  command: Extract<Command, { kind: 'analyze' }>,
  at: number,
  analysis: AnalysisResult | undefined,
): boolean {
  const result: AnalysisResult = analysis ?? {
    outcome: 'inconclusive',
    reason: 'the analysis gave no result',
    routes: [],
  };
  const record = { ...result, at, weight: command.weight };
  t.state = { ...t.state, analyses: [...(t.state.analyses ?? []), record] };
  if (result.outcome === 'breach') {
    const reason = `analysis failed: ${result.reason}`;
    notice(t, at, 'analysis_failed', 'error', reason, 'cutover');
    const run = runOf(t.state, command.id);
    if (run) setRun(t, { ...run, command: null });
    beginEnding(t, at, 'rolled_back', reason);
    return true;
  }
  const level = result.outcome === 'pass' ? 'info' : 'warn';
  const what =
    result.outcome === 'pass'
      ? `analysis passed at the ${command.weight} % step: ${result.reason}`
      : `analysis inconclusive at the ${command.weight} % step, passed with a warning: ${result.reason}`;
  notice(t, at, 'analysis_passed', level, what, 'cutover');
  return false;
}

/** Where a hook ran, for people: "rollout at 10 %". */
function hookWhere(command: Extract<Command, { kind: 'hook' }>): string {
  return command.weight === undefined ? command.point : `${command.point} at ${command.weight} %`;
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

/** Whether the action of `run` waits at a manual hold (for `promote`): it issues nothing there. */
export function isParked(s: MigrationState, run: ActionRun): boolean {
  const action = s.spec.plan.actions[run.index] as Action;
  if (action.type !== 'shift_traffic' || run.command !== null) return false;
  const part = shiftParts(s, action)[run.subStep];
  return part?.kind === 'hold' && part.dwell.hold === 'manual';
}

/** A confirmPromotion or postRollout hook ran (passed, or postRollout failed): the next one is due. */
function countHook(t: Transition, point: string): void {
  const run = t.state.hooksRun ?? { confirmPromotion: 0, postRollout: 0 };
  if (point === 'confirmPromotion')
    t.state = { ...t.state, hooksRun: { ...run, confirmPromotion: run.confirmPromotion + 1 } };
  if (point === 'postRollout')
    t.state = { ...t.state, hooksRun: { ...run, postRollout: run.postRollout + 1 } };
}

/** An action's command ended after the rollback began: the action will not go on. */
function detachRun(t: Transition, commandId: string): void {
  const run = runOf(t.state, commandId);
  if (run) setRun(t, { ...run, command: null });
}

/** Keeps what a command did, whatever happens next, so that a rollback can undo it. */
function recordEffect(t: Transition, command: Command, output: unknown): void {
  const s = t.state;
  switch (command.kind) {
    case 'provision': {
      const slots = { ...s.slots };
      setOwn(slots, command.component, { ...own(s.slots, command.component), green: output as never });
      t.state = { ...s, slots };
      return;
    }
    case 'restart': {
      // The live slot with its restarted replicas (new pids, maybe new ports): the commit records it.
      if (output === undefined) return;
      const slots = { ...s.slots };
      setOwn(slots, command.component, { ...own(s.slots, command.component), blue: output as never });
      t.state = { ...s, slots };
      return;
    }
    case 'record_layout':
      t.state = { ...s, layoutRecorded: true };
      return;
    default:
      return;
  }
}

function completeStep(t: Transition, command: Command, at: number): void {
  const s = t.state;
  const run = runOf(s, command.id);
  if (!run) {
    // The bake, the commit's steps, and the waits before retrying them belong to no action.
    if (command.kind === 'wait' && command.purpose === 'bake') {
      t.state = { ...s, bakeDone: true, bakeRemainingMs: null };
      notice(t, at, 'stage_entered', 'info', 'bake time over', 'bake');
    } else if (command.kind === 'apply_route' && command.promote) {
      t.state = { ...s, routesPromoted: s.routesPromoted + 1 };
    } else if (command.kind === 'shift_routes' && command.promote) {
      t.state = { ...s, routesPromoted: s.routesPromoted + command.routes.length };
    } else if (command.kind === 'hook') {
      countHook(t, command.point);
    }
    return;
  }
  if (command.kind === 'wait' && command.purpose !== 'hold') {
    // The wait before a retry is over: the action's call is issued again.
    setRun(t, { ...run, command: null });
    return;
  }
  const action = s.spec.plan.actions[run.index] as Action;
  const steps = subStepCount(s, action);
  if (
    action.type === 'shift_traffic' &&
    (command.kind === 'shift_routes' || command.kind === 'apply_route')
  ) {
    // Each step of a shift in the log: what a person watching a progressive rollout looks for.
    notice(t, at, 'traffic_step', 'info', `${describeCommand(command)}`, action.stage, action.id);
  }
  if (command.kind === 'check_health' && action.type === 'check_health') {
    notice(
      t,
      at,
      'gate_passed',
      'info',
      `health gate passed: ${command.slot === 'blue' ? 'restarted' : 'green'} ${action.component} is healthy`,
      action.stage,
      action.id,
    );
  }
  if (run.subStep + 1 < steps) {
    setRun(t, { ...run, subStep: run.subStep + 1, attempt: 1, gateRemainingMs: null, command: null });
    return;
  }
  notice(t, at, 'action_succeeded', 'info', `${action.id} done`, action.stage, action.id);
  finishRun(t, run.index);
}

function onFailed(t: Transition, command: Command, at: number, message: string, retryable: boolean): void {
  const s = t.state;
  t.state = { ...s, lastError: message };
  const what = describeCommand(command);
  const run = runOf(s, command.id);
  if (s.lifecycle === 'rolling_back') {
    const ending = s.ending as NonNullable<MigrationState['ending']>;
    if (ending.running) {
      onUndoFailed(t, command, at, message);
      return;
    }
    const undoing = ending.steps[ending.cursor]?.id === command.id;
    if (!undoing) {
      // An interrupted action failed: its undo step is already planned.
      detachRun(t, command.id);
      return;
    }
    if (s.attempt < maxAttemptsPerUndoStep) {
      notice(t, at, 'action_retry', 'warn', `undo: ${what} failed (${message}); retrying`);
      retryLater(t, s.attempt);
      return;
    }
    notice(
      t,
      at,
      'action_failed',
      'error',
      `undo: ${what} failed ${s.attempt} times (${message}); skipped, needs a person`,
    );
    // A retried step that fails again is left for a person again: the same entry, not a second one.
    const again = ending.skipped.some((s) => s.retrying?.as === command.id);
    const skipped = again
      ? ending.skipped.map((s): SkippedStep => {
          if (s.retrying?.as !== command.id) return s;
          const { retrying: _retrying, ...rest } = s;
          return { ...rest, error: message };
        })
      : [...ending.skipped, { command, what, error: message }];
    t.state = { ...t.state, attempt: 1, ending: { ...ending, cursor: ending.cursor + 1, skipped } };
    return;
  }
  if (command.kind === 'hook') {
    onHookFailed(t, command, at, message);
    return;
  }
  if (s.lifecycle === 'committing') {
    // Past the point of no return: a commit step is retried until it succeeds, never undone.
    notice(t, at, 'action_retry', 'warn', `commit step ${what} failed (${message}); retrying`);
    if (run) retryRunLater(t, run, Math.min(run.attempt, 6));
    else retryLater(t, Math.min(s.attempt, 6));
    return;
  }
  if (!run) return; // the bake's wait: issued again
  if (command.kind === 'wait') {
    setRun(t, { ...run, command: null });
    return;
  }
  const action = s.spec.plan.actions[run.index] as Action;
  if (retryable && run.attempt < maxAttemptsPerCall) {
    notice(
      t,
      at,
      'action_retry',
      'warn',
      `${action.id}: ${message}; retry ${run.attempt + 1} of ${maxAttemptsPerCall}`,
      action.stage,
      action.id,
    );
    retryRunLater(t, run, run.attempt);
    return;
  }
  setRun(t, { ...run, command: null });
  const kind = command.kind === 'check_health' ? 'gate_failed' : 'action_failed';
  const reason =
    command.kind === 'check_health'
      ? `health gate failed for ${action.component}: ${message}`
      : `${action.id} failed: ${message}`;
  notice(t, at, kind, 'error', reason, action.stage, action.id);
  beginEnding(t, at, 'failed', reason);
}

/**
 * Green lost its health after its gate (during a hold or the bake, or just before a weight change
 * or the drain): the migration rolls back at once, `rolled_back`, as a breached analysis does.
 * False past the commit or in a rollback: the failure is handled as any other there.
 */
function onGreenLost(t: Transition, command: Command, at: number, message: string): boolean {
  const s = t.state;
  if (s.lifecycle !== 'running' && s.lifecycle !== 'paused') return false;
  t.state = { ...s, lastError: message };
  const run = runOf(t.state, command.id);
  if (run) setRun(t, { ...run, command: null });
  const action = run ? s.spec.plan.actions[run.index] : undefined;
  const stage = action?.stage ?? (command.kind === 'wait' && command.purpose === 'bake' ? 'bake' : 'cutover');
  notice(t, at, 'gate_failed', 'error', message, stage, action?.id);
  beginEnding(t, at, 'rolled_back', message);
  return true;
}

/**
 * A hook failed (runHook made its attempts): before the commit it rolls back with its reason;
 * postRollout, after the commit, cannot: a warning, and the migration completes.
 */
function onHookFailed(
  t: Transition,
  command: Extract<Command, { kind: 'hook' }>,
  at: number,
  message: string,
): void {
  const run = runOf(t.state, command.id);
  if (!hookFailureRollsBack(command.point)) {
    notice(
      t,
      at,
      'hook_failed',
      'warn',
      `hook ${command.name} (${command.point}) failed, after the commit: ${message}`,
    );
    countHook(t, command.point);
    return;
  }
  if (run) setRun(t, { ...run, command: null });
  // runHook's reason names the hook and its target already: say where it ran in front of it.
  const reason = `${hookWhere(command)}: ${message}`;
  notice(t, at, 'hook_failed', 'error', reason, 'cutover');
  beginEnding(t, at, 'rolled_back', reason);
}

/** A command of no action failed: wait, then it is issued again (attempt counted on the state). */
function retryLater(t: Transition, attempt: number): void {
  t.state = { ...t.state, attempt: attempt + 1 };
  issue(t, { kind: 'wait', ms: retryBackoffMs(attempt), purpose: 'retry' });
}

/** An action's call failed: its wait before the retry is the action's command in flight. */
function retryRunLater(t: Transition, run: ActionRun, attempt: number): void {
  setRun(t, { ...run, attempt: attempt + 1 });
  issue(t, { kind: 'wait', ms: retryBackoffMs(attempt), purpose: 'retry' }, run.index);
}

function onCancelled(t: Transition, command: Command, elapsedMs: number): void {
  const run = runOf(t.state, command.id);
  if (run) {
    // A gate goes on later with the deadline it had left; any other call is issued again.
    // A hold goes on with the time it had left, as a gate does.
    const gateRemainingMs =
      command.kind === 'check_health'
        ? Math.max(0, command.deadlineMs - elapsedMs)
        : command.kind === 'wait' && command.purpose === 'hold'
          ? Math.max(0, command.ms - elapsedMs)
          : run.gateRemainingMs;
    setRun(t, { ...run, command: null, gateRemainingMs });
  } else if (command.kind === 'wait' && command.purpose === 'bake') {
    t.state = { ...t.state, bakeRemainingMs: Math.max(0, command.ms - elapsedMs) };
  }
}

/**
 * Starts a rollback (operator, cancel or failure): plans the undo steps and runs them. `reason` is
 * how the migration will have ended; `cause` opens the notice (a failure's reason was just given in
 * its own notice, gate_failed or action_failed, so it has none).
 */
function beginEnding(t: Transition, at: number, outcome: Outcome, reason: string, cause?: string): void {
  const s = t.state;
  const steps = undoSteps(s).map((command) => ({ ...command, id: '' }) as Command);
  let next = s.nextCommand;
  for (const command of steps) command.id = `c${next++}`;
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

/** A restart in place already issued is not undone (see undoSteps): say so. */
function restartsKept(s: MigrationState): string {
  const actions = s.spec.plan.actions;
  const started = [...s.done, ...s.running.map((r) => r.index)];
  const issued = started.some((i) => actions[i]?.type === 'restart');
  return issued ? ' (replicas restarted in place were down before; they stay)' : '';
}

/** What a rollback will do, in the order it does it. */
function describeUndo(steps: readonly Command[]): string {
  const routes = steps.some((c) => isRouteCommand(c));
  const green = steps.some((c) => c.kind === 'retire');
  if (routes && green) return 'routes back to blue first, then green retired';
  if (routes) return 'routes back to blue';
  if (green) return 'green retired (no traffic had moved to it)';
  return 'nothing to undo';
}

function beginCommit(t: Transition, at: number, why: string): void {
  t.state = { ...t.state, lifecycle: 'committing', committedAt: at, attempt: 1 };
  notice(t, at, 'committing', 'info', `${why}; committing (point of no return)`, 'commit');
}

/**
 * What one lifecycle state did when advanced: `settled` (a command is in flight, or the state waits
 * for an event or a verb), or `again` (it moved to a state that may advance at once).
 */
type Advanced = 'settled' | 'again';

/** Issues the commands that may start now, or moves to the next lifecycle state. */
function advance(t: Transition, at: number): void {
  while (advanceState(t, at) === 'again') {
    // A state moved on (running → committing): advance the new one.
  }
}

/** One function per lifecycle state; the switch is exhaustive, so a new state must say what it does. */
function advanceState(t: Transition, at: number): Advanced {
  const lifecycle = t.state.lifecycle;
  switch (lifecycle) {
    case 'running':
      return advanceRunning(t, at);
    case 'committing':
      return advanceCommitting(t, at);
    case 'rolling_back':
      return advanceRollingBack(t, at);
    case 'paused':
    case 'awaiting_promotion':
    case 'awaiting_commit':
      // Waiting for a verb (resume, promote, commit, rollback, cancel): onOperator moves them on.
      return 'settled';
    case 'completed':
    case 'rolled_back':
    case 'cancelled':
    case 'failed':
      // Final: nothing more is ever issued.
      return 'settled';
    default:
      return assertNever(lifecycle, 'lifecycle');
  }
}

/** Running: pause if asked, else the next action before the commit, the bake, then the commit. */
function advanceRunning(t: Transition, at: number): Advanced {
  const s = t.state;
  if (s.pauseRequested) {
    if (s.inflight.length > 0) return 'settled'; // paused once what is in flight has ended
    t.state = { ...s, lifecycle: 'paused', pauseRequested: false };
    notice(t, at, 'paused', 'info', `paused${describePosition(t.state)}`);
    return 'settled';
  }
  const commitAt = commitIndex(s.spec);
  if (s.cursor < commitAt) {
    scheduleActions(t, at, commitAt);
    awaitPromotion(t, at);
    return 'settled';
  }
  if (s.inflight.length > 0) return 'settled';
  if (!s.bakeDone && s.spec.desired.strategy.bake > 0) {
    const ms = s.bakeRemainingMs ?? s.spec.desired.strategy.bake;
    if (s.bakeRemainingMs === null) {
      notice(t, at, 'stage_entered', 'info', `bake: waiting ${formatDuration(ms)} before the commit`, 'bake');
    }
    issue(t, { kind: 'wait', ms, purpose: 'bake' });
    return 'settled';
  }
  // confirmPromotion: the last gate, once bake is over, one hook after the other.
  const confirm = s.spec.desired.strategy.hooks?.confirmPromotion ?? [];
  const confirmed = s.hooksRun?.confirmPromotion ?? 0;
  if (confirmed < confirm.length) {
    issue(t, hookCommand(s, 'confirmPromotion', confirmed));
    return 'settled';
  }
  if (s.spec.desired.strategy.commit === 'manual') {
    t.state = { ...s, lifecycle: 'awaiting_commit', bakeDone: true };
    notice(
      t,
      at,
      'awaiting_commit',
      'info',
      `awaiting commit: run \`cutover topology migration commit ${s.spec.id}\``,
    );
    return 'settled';
  }
  beginCommit(t, at, 'all stages passed');
  return 'again';
}

/**
 * Nothing in flight and a shift waits at a manual hold: the migration awaits `promote` (or a
 * rollback or cancel). Other actions ready would have been issued first: it waits only when idle.
 */
function awaitPromotion(t: Transition, at: number): void {
  const s = t.state;
  if (s.inflight.length > 0) return;
  const run = s.running.find((r) => isParked(s, r));
  if (!run) return;
  const action = s.spec.plan.actions[run.index] as Action;
  const weight = [...shiftParts(s, action).slice(0, run.subStep)].reverse().find((p) => p.kind === 'weight');
  const at100 = weight?.kind === 'weight' ? ` at ${weight.percent} %` : '';
  t.state = { ...s, lifecycle: 'awaiting_promotion' };
  notice(
    t,
    at,
    'awaiting_promotion',
    'info',
    `awaiting promotion${at100}: run \`cutover topology migration promote ${s.spec.id}\` for the next step (--full: straight to 100 %)`,
    action.stage,
    action.id,
  );
}

/** Committing: record the layout, promote the routes, finish the actions after the commit; then done. */
function advanceCommitting(t: Transition, at: number): Advanced {
  const s = t.state;
  // Recording the layout and promoting the routes run alone, one after the other.
  if (!s.layoutRecorded) {
    if (s.inflight.length === 0) issue(t, { kind: 'record_layout' });
    return 'settled';
  }
  const promote = routesToPromote(s);
  if (s.routesPromoted < promote.length) {
    // Format 1.2: every route in one command, as its shift steps were; before it, one at a time.
    if (s.inflight.length > 0) return 'settled';
    if (sinceFormat12(s)) {
      issue(t, { kind: 'shift_routes', routes: promote, greenPercent: 0, restore: false, promote: true });
    } else {
      const route = promote[s.routesPromoted] as string;
      issue(t, { kind: 'apply_route', route, greenPercent: 0, restore: false, promote: true });
    }
    return 'settled';
  }
  if (s.cursor < s.spec.plan.actions.length) {
    scheduleActions(t, at, s.spec.plan.actions.length);
    return 'settled';
  }
  if (s.inflight.length > 0) return 'settled';
  // postRollout: after the commit, one hook after the other; a failure is a warning (onHookFailed).
  const post = s.spec.desired.strategy.hooks?.postRollout ?? [];
  const ran = s.hooksRun?.postRollout ?? 0;
  if (ran < post.length) {
    issue(t, hookCommand(s, 'postRollout', ran));
    return 'settled';
  }
  t.state = { ...s, lifecycle: 'completed', endedAt: at };
  notice(t, at, 'completed', 'info', `completed: environment ${s.spec.environment} is at the new layout`);
  return 'settled';
}

/** Rolling back (or ending another way): the next undo step, then the outcome. Waits while cancelling. */
function advanceRollingBack(t: Transition, at: number): Advanced {
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
  const serving = routeLeft ? 'blue may not be serving: not every route is back on it' : 'blue is serving';
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
function scheduleUndo(t: Transition): boolean {
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

/** The undo run whose command (the step, or its retry wait) this is. */
function undoRunOf(ending: Ending, commandId: string): UndoRun | undefined {
  return ending.running?.find((r) => r.command === commandId);
}

function setUndoRuns(t: Transition, running: UndoRun[], extra: Partial<Ending> = {}): void {
  t.state = { ...t.state, ending: { ...(t.state.ending as Ending), running, ...extra } };
}

/** An undo step is finished (done, or left for a person): it leaves `running`, joins `finished`. */
function finishUndo(t: Transition, run: UndoRun, skipped: SkippedStep[]): void {
  const ending = t.state.ending as Ending;
  const finished = [...(ending.finished as number[])];
  finished.splice(lowerBound(finished, run.index), 0, run.index);
  let cursor = ending.cursor;
  while (finished[cursor] === cursor) cursor++;
  const running = (ending.running as UndoRun[]).filter((r) => r !== run);
  setUndoRuns(t, running, { finished, cursor, skipped });
}

function onUndoSucceeded(t: Transition, command: Command, at: number): void {
  const ending = t.state.ending as Ending;
  const run = undoRunOf(ending, command.id);
  if (!run) {
    // An action that was in flight when the rollback began finished; its effect is undone by the steps.
    detachRun(t, command.id);
    return;
  }
  const running = ending.running as UndoRun[];
  if (command.kind === 'wait') {
    // The wait before a retry is over: the step is issued again.
    setUndoRuns(
      t,
      running.map((r) => (r === run ? { ...r, command: null } : r)),
    );
    return;
  }
  notice(t, at, 'rollback_step', 'info', `undo: ${describeCommand(command)} done`);
  // A step a person asked to retry is resolved once it succeeds.
  const skipped = ending.skipped.map((entry): SkippedStep => {
    if (entry.retrying?.as !== command.id) return entry;
    const { retrying, ...rest } = entry;
    return { ...rest, resolved: { how: 'retried', at, ...(retrying.by ? { by: retrying.by } : {}) } };
  });
  finishUndo(t, run, skipped);
}

function onUndoFailed(t: Transition, command: Command, at: number, message: string): void {
  const ending = t.state.ending as Ending;
  const run = undoRunOf(ending, command.id);
  if (!run) {
    detachRun(t, command.id); // an interrupted action failed: its undo step is already planned
    return;
  }
  const running = ending.running as UndoRun[];
  const what = describeCommand(command);
  if (command.kind === 'wait' || run.attempt < maxAttemptsPerUndoStep) {
    if (command.kind !== 'wait')
      notice(t, at, 'action_retry', 'warn', `undo: ${what} failed (${message}); retrying`);
    const attempt = command.kind === 'wait' ? run.attempt : run.attempt + 1;
    const wait = {
      id: `c${t.state.nextCommand}`,
      kind: 'wait',
      ms: retryBackoffMs(run.attempt),
      purpose: 'retry',
    } as const;
    t.state = { ...t.state, inflight: [...t.state.inflight, wait], nextCommand: t.state.nextCommand + 1 };
    t.commands.push(wait);
    setUndoRuns(
      t,
      running.map((r) => (r === run ? { ...r, attempt, command: wait.id } : r)),
    );
    return;
  }
  notice(
    t,
    at,
    'action_failed',
    'error',
    `undo: ${what} failed ${run.attempt} times (${message}); skipped, needs a person`,
  );
  // A retried step that fails again is left for a person again: the same entry, not a second one.
  const again = ending.skipped.some((entry) => entry.retrying?.as === command.id);
  const skipped = again
    ? ending.skipped.map((entry): SkippedStep => {
        if (entry.retrying?.as !== command.id) return entry;
        const { retrying: _retrying, ...rest } = entry;
        return { ...rest, error: message };
      })
    : [...ending.skipped, { command, what, error: message }];
  finishUndo(t, run, skipped);
}

/**
 * Issues what may start now, up to the parallelism, before plan index `to`: first the actions
 * started and between two commands (a retry after its wait, the next step of a stepped shift, a gate
 * after a pause), then new actions whose prerequisites are done, in plan order. Nothing starts
 * while a pause is requested.
 */
function scheduleActions(t: Transition, at: number, to: number): void {
  if (t.state.pauseRequested) return;
  const limit = parallelismOf(t.state.spec);
  for (const run of t.state.running) {
    if (t.state.inflight.length >= limit) return;
    if (run.command === null) issueAction(t, at, run.index);
  }
  const plan = t.state.spec.plan;
  const { byId } = planIndex(plan);
  const isDone = (id: string) => sortedHas(t.state.done, byId.get(id) ?? -1);
  for (let i = t.state.cursor; i < to && t.state.inflight.length < limit; i++) {
    if (sortedHas(t.state.done, i) || t.state.running.some((r) => r.index === i)) continue;
    if (!prerequisites(plan.actions, i).every(isDone)) continue;
    startAction(t, at, i);
  }
}

function startAction(t: Transition, at: number, index: number): void {
  const s = t.state;
  const actions = s.spec.plan.actions;
  const action = actions[index] as Action;
  // The first action of a stage to start enters it (the commit stage is entered by `committing`).
  const [first, end] = planIndex(s.spec.plan).stageRange.get(action.stage) as [number, number];
  const entered =
    (s.done[lowerBound(s.done, first)] ?? end) < end ||
    s.running.some((r) => r.index >= first && r.index < end);
  if (!entered && action.stage !== 'commit') {
    notice(t, at, 'stage_entered', 'info', `stage ${action.stage}`, action.stage);
  }
  const run: ActionRun = { index, subStep: 0, attempt: 1, gateRemainingMs: null, command: null };
  const running = [...s.running, run].sort((a, b) => a.index - b.index);
  t.state = { ...s, running };
  issueAction(t, at, index);
}

function issueAction(t: Transition, at: number, index: number): void {
  const s = t.state;
  const run = s.running.find((r) => r.index === index) as ActionRun;
  if (isParked(s, run)) return; // at a manual hold: `promote` moves it on
  const action = s.spec.plan.actions[index] as Action;
  const command = commandFor(s, action, run);
  if (run.subStep === 0 && run.attempt === 1 && run.gateRemainingMs === null) {
    notice(t, at, 'action_started', 'info', `${action.id}: ${action.reason}`, action.stage, action.id);
  }
  if (command.kind === 'provision' && !s.provisioned.includes(command.component)) {
    t.state = { ...s, provisioned: withProvisioned(s, command.component) };
  }
  const routes = routesOf(command).filter((r) => !s.touchedRoutes.includes(r));
  if (routes.length > 0) t.state = { ...t.state, touchedRoutes: [...t.state.touchedRoutes, ...routes] };
  if (command.kind === 'check_health') {
    // The gate checks green through the preview listeners of its routes, which it opens to green
    // (at 0 % of real traffic): a rollback must put those routes back too.
    const previews = previewRoutes(s, command.component).filter((r) => !t.state.touchedRoutes.includes(r));
    if (previews.length > 0) t.state = { ...t.state, touchedRoutes: [...t.state.touchedRoutes, ...previews] };
  }
  issue(t, command, index);
}

/** `provisioned` with one more, in the order of their provisions in the plan (dependencies first), whatever order they started in. */
function withProvisioned(s: MigrationState, component: string): string[] {
  const { provisionOf } = planIndex(s.spec.plan);
  const at = (c: string) => provisionOf.get(c) ?? -1;
  const out = [...s.provisioned];
  // Provisions mostly start in plan order: walk back from the end to the place of this one.
  let i = out.length;
  while (i > 0 && at(out[i - 1] as string) > at(component)) i--;
  out.splice(i, 0, component);
  return out;
}

/** Numbers a command and puts it in flight; `runIndex` names the action it belongs to. */
function issue(t: Transition, command: Omit<Command, 'id'> | Command, runIndex?: number): void {
  const s = t.state;
  const withId = { ...command, id: `c${s.nextCommand}` } as Command;
  const running =
    runIndex === undefined
      ? s.running
      : s.running.map((r) => (r.index === runIndex ? { ...r, command: withId.id } : r));
  t.state = { ...s, inflight: [...s.inflight, withId], nextCommand: s.nextCommand + 1, running };
  t.commands.push(withId);
}

/** Routes of the built-in router to a component that have a preview listener, by name. */
export function previewRoutes(s: MigrationState, component: string): string[] {
  return Object.keys(s.spec.desired.routes)
    .filter((name) => {
      const route = own(s.spec.desired.routes, name);
      return route?.to === component && route.preview !== undefined && route.driver === undefined;
    })
    .sort();
}

/** Routes that serve a green slot now: at the commit, that slot becomes the route's live one. */
export function routesToPromote(s: MigrationState): string[] {
  return Object.keys(s.spec.desired.routes)
    .filter((name) => own(s.slots, own(s.spec.desired.routes, name)?.to as string)?.green !== undefined)
    .sort();
}

/**
 * A stepped shift is several steps: set the weight, check the health of each component its routes
 * send to, set the next weight, …, ending on the last weight.
 */
export function subStepCount(s: MigrationState, action: Action): number {
  if (action.type !== 'shift_traffic') return 1;
  return shiftParts(s, action).length;
}

/** The routes a command changes (numbered or not yet). */
function routesOf(command: { kind: Command['kind']; route?: unknown; routes?: unknown }): string[] {
  if (command.kind === 'apply_route' || command.kind === 'remove_route') return [command.route as string];
  if (command.kind === 'shift_routes') return command.routes as string[];
  return [];
}

function isRouteCommand(command: Command): boolean {
  return routesOf(command).length > 0;
}

function describePosition(s: MigrationState): string {
  const action = currentAction(s);
  if (!action) return '';
  return ` before ${action.id}`;
}

export function describeCommand(c: Command): string {
  switch (c.kind) {
    case 'provision':
      return `provision green ${c.component}`;
    case 'restart':
      return `restart ${c.component} in place`;
    case 'replicate':
      return `replicate ${c.component}`;
    case 'check_health':
      return `health check of ${c.slot === 'blue' ? 'restarted' : 'green'} ${c.component}`;
    case 'apply_route':
      if (c.promote) return `route ${c.route}: green is its live slot`;
      return c.restore ? `route ${c.route} back to blue` : `route ${c.route} at ${c.greenPercent}% green`;
    case 'shift_routes': {
      const routes = `route${c.routes.length === 1 ? '' : 's'} ${c.routes.join(', ')}`;
      if (c.promote) return `${routes}: green is the live slot`;
      return c.restore ? `${routes} back to blue` : `${routes} at ${c.greenPercent}% green`;
    }
    case 'remove_route':
      return `remove route ${c.route}`;
    case 'drain':
      return `drain blue ${c.component}`;
    case 'retire':
      return `retire ${c.slot} ${c.component}`;
    case 'wait':
      return c.purpose === 'hold' ? `hold ${formatDuration(c.ms)}` : `wait ${formatDuration(c.ms)}`;
    case 'analyze':
      return `analysis of ${c.routes.map((r) => r.route).join(', ')} over ${formatDuration(c.ms)} at ${c.weight} %`;
    case 'hook':
      return `hook ${c.name} (${hookWhere(c)})`;
    case 'record_layout':
      return 'record the new layout';
    default:
      return assertNever(c, 'command');
  }
}

function notice(
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
