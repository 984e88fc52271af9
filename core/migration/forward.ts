import { prerequisites } from '../plan/plan-edges.js';
import type { Action } from '../plan/types.js';
import { formatDuration } from '../topology/duration.js';
import { commandFor, hookCommand, shiftParts, sinceFormat12 } from './commands.js';
import { lowerBound, planIndex, sortedHas } from './plan-index.js';
import {
  commitIndex,
  describePosition,
  isParked,
  parallelismOf,
  previewRoutes,
  routesOf,
  routesToPromote,
} from './queries.js';
import { type Advanced, issue, notice } from './transition.js';
import type { ActionRun, MigrationState, Transition } from './types.js';

export function beginCommit(t: Transition, at: number, why: string): void {
  t.state = { ...t.state, lifecycle: 'committing', committedAt: at, attempt: 1 };
  notice(t, at, 'committing', 'info', `${why}; committing (point of no return)`, 'commit');
}

/** Running: pause if asked, else the next action before the commit, the bake, then the commit. */
export function advanceRunning(t: Transition, at: number): Advanced {
  const s = t.state;
  // A switch under way is finished first: paused in it, the router would hold and blue stay fenced.
  if (s.pauseRequested && !switching(s)) {
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
export function awaitPromotion(t: Transition, at: number): void {
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
export function advanceCommitting(t: Transition, at: number): Advanced {
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

/**
 * Issues what may start now, up to the parallelism, before plan index `to`: first the actions
 * started and between two commands (a retry after its wait, the next step of a stepped shift, a gate
 * after a pause), then new actions whose prerequisites are done, in plan order. Nothing starts
 * while a pause is requested.
 */
function scheduleActions(t: Transition, at: number, to: number): void {
  if (t.state.pauseRequested && !switching(t.state)) return;
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

/** A switch to green has begun (the router holds) and has not released its requests yet. */
function switching(s: MigrationState): boolean {
  return s.switch !== undefined && !s.switch.released && s.switch.direction === 'to_green';
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
