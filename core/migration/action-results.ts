import type { Action } from '../plan/types.js';
import { own, setOwn } from '../records.js';
import { hookFailureRollsBack } from '../topology/hook-types.js';
import { describeCommand, hookWhere, subStepCount } from './queries.js';
import { lagCaughtUpMessage, laggingMessage, lagWaitOf } from './replication-lag.js';
import { isSwitchCommand, recordSwitchEffect, releaseSwitch } from './switch.js';
import { finishRun, issue, notice, retryLater, retryRunLater, runOf, setRun } from './transition.js';
import type { AnalysisResult, Command, LagReport, SwitchResult, Transition } from './types.js';
import { beginEnding } from './undo.js';

/** Attempts of one driver call before its action fails (transient errors only). */
export const maxAttemptsPerCall = 3;

/** What an action's command (or the bake, or a commit step) did: its effect kept, its action moved on. */
export function actionSucceeded(
  t: Transition,
  command: Command,
  at: number,
  analysis?: AnalysisResult,
  lagging?: LagReport,
): void {
  const s = t.state;
  if (s.lifecycle === 'committing' || s.lifecycle === 'running' || s.lifecycle === 'paused') {
    if (command.kind === 'analyze' && onAnalysis(t, command, at, analysis)) return;
    if (command.kind === 'hook') {
      notice(t, at, 'hook_passed', 'info', `hook ${command.name} (${hookWhere(command)}) passed`);
    }
    if (command.kind === 'check_health' && lagging && waitForLag(t, command, at, lagging)) return;
    if (command.kind === 'wait_lag') {
      notice(
        t,
        at,
        'replication_caught_up',
        'info',
        lagCaughtUpMessage(lagging, command.component),
        'health_gate',
      );
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

/**
 * The gate found green healthy but trailing blue by more than maxLag: the episode begins (one
 * `replication_lagging` notice), and the gate's action waits for the lag (`wait_lag`) before it
 * passes. False when the command is no gate's.
 */
function waitForLag(
  t: Transition,
  command: Extract<Command, { kind: 'check_health' }>,
  at: number,
  lagging: LagReport,
): boolean {
  const run = runOf(t.state, command.id);
  const action = run ? t.state.spec.plan.actions[run.index] : undefined;
  if (!run || action?.type !== 'check_health') return false;
  const wait = lagWaitOf(t.state, command.component);
  notice(
    t,
    at,
    'replication_lagging',
    'warn',
    laggingMessage(lagging, wait.timeoutMs),
    action.stage,
    action.id,
  );
  issue(t, wait, run.index);
  return true;
}

/** A confirmPromotion or postRollout hook ran (passed, or postRollout failed): the next one is due. */
function countHook(t: Transition, point: string): void {
  const run = t.state.hooksRun ?? { confirmPromotion: 0, postRollout: 0 };
  if (point === 'confirmPromotion')
    t.state = { ...t.state, hooksRun: { ...run, confirmPromotion: run.confirmPromotion + 1 } };
  if (point === 'postRollout')
    t.state = { ...t.state, hooksRun: { ...run, postRollout: run.postRollout + 1 } };
}

/** Keeps what a command did, whatever happens next, so that a rollback can undo it. */
export function recordEffect(
  t: Transition,
  command: Command,
  output: unknown,
  at: number,
  switched?: SwitchResult,
): void {
  const s = t.state;
  if (isSwitchCommand(command)) {
    recordSwitchEffect(t, command, at, switched, (message, kind) =>
      notice(t, at, kind, 'info', message, 'cutover'),
    );
    return;
  }
  if ((command.kind === 'shift_routes' || command.kind === 'apply_route') && s.switch && !s.switch.released) {
    // The routes set without the hold: what it held went on to the side they now send to.
    const heldMs = releaseSwitch(t, at);
    const to = command.restore || command.greenPercent < 100 ? 'blue' : 'green';
    const count = switched?.heldCount;
    const held = count === undefined ? '' : ` (${count} held)`;
    notice(
      t,
      at,
      'write_hold_ended',
      'info',
      `write hold ended after ${heldMs} ms: the held requests went to ${to}${held}`,
      'cutover',
    );
    return;
  }
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
    case 'retire':
      // A retired slot is fenced no more (blue after a switch, green after a switch back).
      if (s.switch?.fenced.includes(`${command.component}/${command.slot}`)) {
        const fenced = s.switch.fenced.filter((f) => f !== `${command.component}/${command.slot}`);
        t.state = { ...s, switch: { ...s.switch, fenced } };
      }
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
  if ((command.kind === 'check_health' || command.kind === 'wait_lag') && action.type === 'check_health') {
    const slot = command.kind === 'check_health' ? command.slot : undefined;
    notice(
      t,
      at,
      'gate_passed',
      'info',
      `health gate passed: ${slot === 'blue' ? 'restarted' : 'green'} ${action.component} is healthy`,
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

/**
 * Green lost its health after its gate (during a hold or the bake, or just before a weight change
 * or the drain): the migration rolls back at once, `rolled_back`, as a breached analysis does.
 * False past the commit or in a rollback: the failure is handled as any other there.
 */
export function greenLost(t: Transition, command: Command, at: number, message: string): boolean {
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

/** An action's command failed (not an undo step's): retried, or the migration rolls back. */
export function actionFailed(
  t: Transition,
  command: Command,
  at: number,
  message: string,
  retryable: boolean,
): void {
  const s = t.state;
  const what = describeCommand(command);
  const run = runOf(s, command.id);
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
  if (isSwitchCommand(command)) {
    // The router may be holding requests: the log says the hold ends with the switch undone.
    notice(
      t,
      at,
      'write_hold_ended',
      'warn',
      `the switch is undone (${describeCommand(command)}: ${message}): blue takes writes again, and the held requests go to it`,
      action.stage,
      action.id,
    );
  }
  const gate = command.kind === 'check_health' || command.kind === 'wait_lag';
  const kind = gate ? 'gate_failed' : 'action_failed';
  const reason = gate
    ? `health gate failed for ${action.component}: ${message}`
    : `${action.id} failed: ${message}`;
  notice(t, at, kind, 'error', reason, action.stage, action.id);
  beginEnding(t, at, 'failed', reason);
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

export function onCancelled(t: Transition, command: Command, elapsedMs: number): void {
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
