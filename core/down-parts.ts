/** What taking an environment down does, in order. Pure: the Temporal workflow uses it too. */
import { CutoverError } from './errors.js';
import type { CurrentLayout } from './layout.js';
import { dependencyDepths, inTeardownOrder } from './plan/dependency-order.js';
import { own } from './records.js';

/** One step of taking an environment down: a route to remove, or a component's live slot to retire. */
export type DownPart = { route: string } | { component: string };

/** What taking a layout down does, in order: traffic first (routes), then what served it, dependents first. */
export function downParts(layout: CurrentLayout): {
  order: DownPart[];
  components: string[];
  routes: string[];
} {
  const topology = layout.topology;
  if (!topology) return { order: [], components: [], routes: [] };
  const routes = Object.keys(topology.routes).sort();
  const components = Object.keys(topology.components).sort();
  const order: DownPart[] = routes.map((route) => ({ route }));
  for (const component of inTeardownOrder(components, dependencyDepths(topology.components))) {
    if (own(layout.slots, component)) order.push({ component });
  }
  return { order, components, routes };
}

/** A driver's failure while taking down, said as such (not as a bug in cutover); down can be run again. */
export function downFailed(environment: string, part: DownPart | null, error: unknown): CutoverError {
  const what =
    part === null ? '' : 'route' in part ? ` route ${part.route}:` : ` component ${part.component}:`;
  const message = error instanceof Error ? error.message : String(error);
  return new CutoverError(
    'DRIVER_FAILED',
    `taking ${environment} down failed at${what} ${message}; what was stopped stays stopped: fix the cause and run \`cutover topology down\` again`,
  );
}

/**
 * Refuses to take down an environment that has no layout recorded at all (never migrated): a
 * mistyped name or the wrong state directory, not a success. One taken down before has a layout
 * (empty), and taking it down again is idempotent. `where`: the state directory or Temporal.
 */
export function refuseUnknownEnvironment(layout: CurrentLayout, where: string): void {
  if (layout.serial !== 0) return;
  throw new CutoverError(
    'ENVIRONMENT_NOT_FOUND',
    `environment ${layout.environment} has no recorded layout in ${where}: it was never migrated; check metadata.name of the topology file, or the state directory (--state-dir, CUTOVER_STATE_DIR)`,
  );
}
