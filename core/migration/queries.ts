import { assertNever } from '../errors.js';
import type { Action, Stage } from '../plan/types.js';
import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { shiftParts } from './commands.js';
import { planIndex } from './plan-index.js';
import { describeSwitchCommand } from './switch.js';
import type { ActionRun, Command, MigrationSpec, MigrationState } from './types.js';

/** How many commands may be in flight at once; 1 for a spec from before the bound existed. */
export function parallelismOf(spec: MigrationSpec): number {
  return Math.max(1, spec.parallelism ?? 1);
}

export function currentAction(s: MigrationState): Action | undefined {
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

/** Whether the action of `run` waits at a manual hold (for `promote`): it issues nothing there. */
export function isParked(s: MigrationState, run: ActionRun): boolean {
  const action = s.spec.plan.actions[run.index] as Action;
  if (action.type !== 'shift_traffic' || run.command !== null) return false;
  const part = shiftParts(s, action)[run.subStep];
  return part?.kind === 'hold' && part.dwell.hold === 'manual';
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
export function routesOf(command: { kind: Command['kind']; route?: unknown; routes?: unknown }): string[] {
  if (command.kind === 'apply_route' || command.kind === 'remove_route') return [command.route as string];
  if (command.kind === 'shift_routes' || command.kind === 'hold_routes') return command.routes as string[];
  return [];
}

export function isRouteCommand(command: Command): boolean {
  return routesOf(command).length > 0;
}

export function describePosition(s: MigrationState): string {
  const action = currentAction(s);
  if (!action) return '';
  return ` before ${action.id}`;
}

/** Where a hook ran, for people: "rollout at 10 %". */
export function hookWhere(command: Extract<Command, { kind: 'hook' }>): string {
  return command.weight === undefined ? command.point : `${command.point} at ${command.weight} %`;
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
    case 'wait_lag':
      return `wait for green ${c.component} to trail blue by at most maxLag`;
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
    case 'hold_routes':
    case 'fence':
    case 'unfence':
    case 'catch_up':
    case 'promote_slot':
    case 'reverse_replication':
      return describeSwitchCommand(c) as string;
    default:
      return assertNever(c, 'command');
  }
}
