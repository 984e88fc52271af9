import { assertNever, InvariantError } from '../errors.js';
import { type StepDwell, shiftDwells, shiftSteps } from '../plan/shift-steps.js';
import type { Action } from '../plan/types.js';
import { has, own } from '../records.js';
import type { HookPoint } from '../topology/hook-types.js';
import { type SwitchStep, switchCommand, switchedBehind, switchSteps, undoSwitch } from './switch.js';
import type { ActionRun, Command, MigrationState } from './types.js';

type Unnumbered<C> = C extends Command ? Omit<C, 'id'> : never;

/** The driver call that carries out (one step of) an action, at the step `run` is at. */
export function commandFor(
  s: MigrationState,
  action: Action,
  run: Pick<ActionRun, 'subStep' | 'gateRemainingMs'>,
): Unnumbered<Command> {
  const component = action.component as string;
  const route = action.route as string;
  switch (action.type) {
    case 'provision':
      return { kind: 'provision', component };
    case 'restart':
      return { kind: 'restart', component };
    case 'replicate':
      return { kind: 'replicate', component };
    case 'check_health': {
      const gate = {
        kind: 'check_health' as const,
        component,
        deadlineMs: run.gateRemainingMs ?? healthDeadlineMs(s, component),
      };
      // A restarted component has no green slot: the gate checks the live one it restarted.
      return restartsInPlace(s, component) ? { ...gate, slot: 'blue' } : gate;
    }
    case 'create_route':
    case 'update_route': {
      const target = own(s.spec.desired.routes, route)?.to as string;
      return {
        kind: 'apply_route',
        route,
        greenPercent: own(s.slots, target)?.green ? 100 : 0,
        restore: false,
      };
    }
    case 'shift_traffic': {
      const part = shiftParts(s, action)[run.subStep];
      if (!part) throw new InvariantError(`${action.id} has no step ${run.subStep}`);
      switch (part.kind) {
        case 'health':
          return {
            kind: 'check_health',
            component: part.component,
            deadlineMs: run.gateRemainingMs ?? healthDeadlineMs(s, part.component),
            // After a step's weight is set: real traffic is on green, the previews were looked through.
            betweenSteps: true,
          };
        case 'weight': {
          const greenPercent = part.percent;
          // A shift of one route per action (plans before 1.2, in older journals) sets its route alone.
          if (action.route !== undefined) return { kind: 'apply_route', route, greenPercent, restore: false };
          return { kind: 'shift_routes', routes: shiftOf(s, action).routes, greenPercent, restore: false };
        }
        case 'hook':
          return hookCommand(s, part.point, part.index, part.weight);
        case 'switch': {
          const shift = shiftOf(s, action);
          return switchCommand(s, part.step, shift.routes, switchedBehind(s, shift.targets));
        }
        case 'hold': {
          const { dwell } = part;
          if (dwell.hold === 'manual')
            throw new InvariantError(`${action.id}: a manual hold issues no command (it awaits promote)`);
          // A hold cut by a pause goes on with what it had left; an analysis measures a whole window again.
          if (dwell.analyses.length > 0)
            return { kind: 'analyze', weight: dwell.weight, ms: dwell.hold, routes: dwell.analyses };
          return { kind: 'wait', ms: run.gateRemainingMs ?? dwell.hold, purpose: 'hold' };
        }
        default:
          return assertNever(part, 'shift part');
      }
    }
    case 'remove_route':
      return { kind: 'remove_route', route };
    case 'drain':
      return { kind: 'drain', component, timeoutMs: drainTimeoutMs(s, component) };
    case 'retire_blue':
    case 'retire':
      return { kind: 'retire', component, slot: 'blue' };
    default:
      return assertNever(action.type, 'action type');
  }
}

/** What a shift moves: its routes, their steps (together), and the components they send to. */
export interface ShiftOf {
  routes: string[];
  steps: number[];
  /** Sorted, each once. */
  targets: string[];
  /** The steps that hold, by weight ascending. */
  dwells: StepDwell[];
}

/**
 * One sub-step of a shift, in order: the preRollout hooks (before any traffic moves); then at each
 * step its weight, the rollout hooks (the weight set), the health of every component the routes
 * send to (but after the last step), and the step's hold, if it has one. Without hooks and holds
 * this is the layout journals were written with (weight, health…, weight, …), so they replay alike.
 */
export type ShiftPart =
  | { kind: 'hook'; point: 'preRollout' | 'rollout'; index: number; weight?: number }
  | { kind: 'weight'; percent: number }
  | { kind: 'health'; component: string }
  | { kind: 'hold'; dwell: StepDwell }
  | { kind: 'switch'; step: SwitchStep };

export function shiftParts(s: MigrationState, action: Action): ShiftPart[] {
  const shift = shiftOf(s, action);
  const hooks = s.spec.desired.strategy.hooks ?? {};
  const parts: ShiftPart[] = [];
  // preRollout belongs to the one shift of format 1.2 (plans before it have a shift per route).
  if (action.routes !== undefined) {
    (hooks.preRollout ?? []).forEach((_, index) => {
      parts.push({ kind: 'hook', point: 'preRollout', index });
    });
  }
  const dwells = new Map(shift.dwells.map((d) => [d.weight, d]));
  // Routes that reach a switched component move at once, under a write hold (switch.ts): their
  // steps before 100 % would split writes between two primaries.
  const switched = switchedBehind(s, shift.targets);
  if (switched.length > 0) {
    for (const step of switchSteps(switched)) parts.push({ kind: 'switch', step });
    parts.push({ kind: 'weight', percent: 100 });
    (hooks.rollout ?? []).forEach((_, index) => {
      parts.push({ kind: 'hook', point: 'rollout', index, weight: 100 });
    });
    const dwell = dwells.get(100);
    if (dwell) parts.push({ kind: 'hold', dwell });
    return parts;
  }
  shift.steps.forEach((percent, i) => {
    parts.push({ kind: 'weight', percent });
    (hooks.rollout ?? []).forEach((_, index) => {
      parts.push({ kind: 'hook', point: 'rollout', index, weight: percent });
    });
    if (i < shift.steps.length - 1) {
      for (const component of shift.targets) parts.push({ kind: 'health', component });
    }
    const dwell = dwells.get(percent);
    if (dwell) parts.push({ kind: 'hold', dwell });
  });
  return parts;
}

/** The command that runs hook `index` of `point`. */
export function hookCommand(
  s: MigrationState,
  point: HookPoint,
  index: number,
  weight?: number,
): Unnumbered<Command> {
  const hook = s.spec.desired.strategy.hooks?.[point]?.[index];
  if (!hook) throw new InvariantError(`no hook ${index} at ${point}`);
  const command = { kind: 'hook' as const, point, index, name: hook.name };
  return weight === undefined ? command : { ...command, weight };
}

export function shiftOf(s: MigrationState, action: Action): ShiftOf {
  const routes = action.routes ?? [action.route as string];
  const specs = routes.map((name) => {
    const spec = own(s.spec.desired.routes, name);
    if (!spec) throw new InvariantError(`route ${name} of ${action.id} is not in the desired topology`);
    return spec;
  });
  const targets = [...new Set(specs.map((r) => r.to))].sort();
  const dwells = shiftDwells(routes.map((name, i) => [name, specs[i] as (typeof specs)[number]] as const));
  return { routes, steps: shiftSteps(specs), targets, dwells };
}

/**
 * Whether a migration's plan is of format 1.2 or later: its routes move as one (its shift steps, its
 * undo of routes and its commit's promotion are each one multi-route command), and its undo steps
 * run as a graph, several at once. Older journals keep the commands they were journaled with, one
 * per route and one undo step at a time, so they replay and resume as they ran.
 */
export function sinceFormat12(s: MigrationState): boolean {
  const format = s.spec.plan.formatVersion;
  return format !== '1.0' && format !== '1.1';
}

/** Whether the plan restarts the component in place (then it has no green slot). */
export function restartsInPlace(s: MigrationState, component: string): boolean {
  return s.spec.plan.actions.some((a) => a.type === 'restart' && a.component === component);
}

function healthDeadlineMs(s: MigrationState, component: string): number {
  return own(s.spec.desired.components, component)?.health?.deadline ?? 0;
}

/** The longest drain timeout among the live routes to a component; 0 when none sends it traffic. */
export function drainTimeoutMs(s: MigrationState, component: string): number {
  let ms = 0;
  for (const route of Object.values(s.spec.base.topology?.routes ?? {})) {
    if (route.to === component) ms = Math.max(ms, route.drain.timeout);
  }
  return ms;
}

/** Waits and probes can stop at any moment without leaving anything half done. */
export function isCancellable(command: Command): boolean {
  return (
    command.kind === 'wait' ||
    command.kind === 'check_health' ||
    command.kind === 'wait_lag' ||
    command.kind === 'drain' ||
    command.kind === 'analyze'
  );
}

/**
 * What a failure, a rollback or a cancel aborts in flight, beyond what is cancellable: driver calls that stand something up
 * (the exec driver kills its process group). What they may have started is undone by the rollback,
 * which retires every green slot issued. Route changes and the commit's steps are never cut short.
 */
export function isAbortedOnEnding(command: Command): boolean {
  return (
    isCancellable(command) ||
    command.kind === 'provision' ||
    command.kind === 'replicate' ||
    command.kind === 'restart' ||
    // A hook's verdict no longer matters once the migration ends; runHook stops it at once.
    command.kind === 'hook'
  );
}

/** 0.5 s, 1 s, 2 s, … capped at 10 s. */
export function retryBackoffMs(attempt: number): number {
  return Math.min(10_000, 500 * 2 ** Math.max(0, attempt - 1));
}

/**
 * The steps that undo what a migration did before its commit, in order: every route it touched
 * back to its blue settings (all in one command, format 1.2), or removed if the migration created
 * it, newest first; then every
 * green slot it started retired, newest first. Blue was never modified but for a restart in place,
 * which is not undone: it started replicas that were down, and stopping them again helps no one.
 */
export function undoSteps(s: MigrationState): Unnumbered<Command>[] {
  const steps: Unnumbered<Command>[] = [];
  const liveRoutes = s.spec.base.topology?.routes ?? {};
  const touched = [...s.touchedRoutes].reverse();
  if (sinceFormat12(s)) {
    // Every live route back on blue in one command (one reload per driver), then the new ones removed.
    const live = touched.filter((route) => has(liveRoutes, route));
    // A switch of stateful components is undone (or switched back) before: blue writable first.
    steps.push(...undoSwitch(s, live));
    if (live.length > 0) steps.push({ kind: 'shift_routes', routes: live, greenPercent: 0, restore: true });
    for (const route of touched) if (!has(liveRoutes, route)) steps.push({ kind: 'remove_route', route });
  } else {
    for (const route of touched) {
      if (has(liveRoutes, route)) steps.push({ kind: 'apply_route', route, greenPercent: 0, restore: true });
      else steps.push({ kind: 'remove_route', route });
    }
  }
  // `provisioned` is in plan order (dependencies first): reversed, dependents are retired first.
  for (const component of [...s.provisioned].reverse()) {
    steps.push({ kind: 'retire', component, slot: 'green' });
  }
  return steps;
}
