import { assertNever, InvariantError } from '../errors.js';
import type { Action } from '../plan/types.js';
import { has, own } from '../records.js';
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
      const spec = own(s.spec.desired.routes, route);
      if (!spec) throw new InvariantError(`route ${route} of ${action.id} is not in the desired topology`);
      if (run.subStep % 2 === 1) {
        return {
          kind: 'check_health',
          component: spec.to,
          deadlineMs: run.gateRemainingMs ?? healthDeadlineMs(s, spec.to),
        };
      }
      return {
        kind: 'apply_route',
        route,
        greenPercent: spec.shift[run.subStep / 2] as number,
        restore: false,
      };
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

/** Whether the plan restarts the component in place (then it has no green slot). */
export function restartsInPlace(s: MigrationState, component: string): boolean {
  return s.spec.plan.actions.some((a) => a.type === 'restart' && a.component === component);
}

function healthDeadlineMs(s: MigrationState, component: string): number {
  return own(s.spec.desired.components, component)?.health?.deadline ?? 0;
}

/** The longest drain timeout among the live routes to a component; 0 when none sends it traffic. */
function drainTimeoutMs(s: MigrationState, component: string): number {
  let ms = 0;
  for (const route of Object.values(s.spec.base.topology?.routes ?? {})) {
    if (route.to === component) ms = Math.max(ms, route.drain.timeout);
  }
  return ms;
}

/** Waits and probes can stop at any moment without leaving anything half done. */
export function isCancellable(command: Command): boolean {
  return command.kind === 'wait' || command.kind === 'check_health' || command.kind === 'drain';
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
    command.kind === 'restart'
  );
}

/** 0.5 s, 1 s, 2 s, … capped at 10 s. */
export function retryBackoffMs(attempt: number): number {
  return Math.min(10_000, 500 * 2 ** Math.max(0, attempt - 1));
}

/**
 * The steps that undo what a migration did before its commit, in order: every route it touched
 * back to its blue settings (or removed, if the migration created it), newest first; then every
 * green slot it started retired, newest first. Blue was never modified but for a restart in place,
 * which is not undone: it started replicas that were down, and stopping them again helps no one.
 */
export function undoSteps(s: MigrationState): Unnumbered<Command>[] {
  const steps: Unnumbered<Command>[] = [];
  const liveRoutes = s.spec.base.topology?.routes ?? {};
  for (const route of [...s.touchedRoutes].reverse()) {
    if (has(liveRoutes, route)) steps.push({ kind: 'apply_route', route, greenPercent: 0, restore: true });
    else steps.push({ kind: 'remove_route', route });
  }
  // `provisioned` is in plan order (dependencies first): reversed, dependents are retired first.
  for (const component of [...s.provisioned].reverse()) {
    steps.push({ kind: 'retire', component, slot: 'green' });
  }
  return steps;
}
