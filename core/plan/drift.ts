import { assertNever } from '../errors.js';
import type { ObservedComponent, ObservedLayout, ObservedRoute } from '../observed.js';
import type { ImageDigests } from './image-changes.js';
import type { SecretDigests } from './secret-changes.js';
import type { Drift } from './types.js';

/** What a plan sees of the world beside the record, and what the operator asks on top. */
export interface PlanInputs {
  /** What the drivers observed running; absent: the record alone (`--refresh=false`). */
  observed?: ObservedLayout;
  /** Components to replace green-blue with no change (`migrate --replace`). */
  replace?: readonly string[];
  /**
   * Digests of the secrets' values now (see SecretDigests); without them a changed secret cannot
   * be seen, and only changes of the file count.
   */
  secrets?: SecretDigests;
  /** The image each container component's tag names now (see ImageDigests); absent: not compared. */
  images?: ImageDigests;
  /**
   * The stateful components whose driver replicates continuously (engine/drivers/switched.ts): a
   * migration that replaces one switches it under a write hold (Plan.stateful). Absent: none.
   */
  switchable?: readonly string[];
}

/** The reason a component is replaced when the operator asked for it and nothing else changed. */
export const replacementRequested = 'replacement requested';

/**
 * Drift found in an observation, in name order: components with replicas not running, routes not
 * served as recorded. Only facts that a repair changes are drift; `unknown` (a driver that cannot
 * tell) never is, and volatile details (pids, in-flight counts, times) never enter the reasons, so
 * two observations of the same drift give the same plan id.
 */
export function findDrift(observed: ObservedLayout | undefined): Drift[] {
  if (!observed) return [];
  const drift: Drift[] = [];
  for (const name of Object.keys(observed.components).sort()) {
    const reason = componentDrift(observed.components[name] as ObservedComponent);
    if (reason) drift.push({ kind: 'component', name, reason });
  }
  for (const name of Object.keys(observed.routes).sort()) {
    const reason = routeDrift(observed.routes[name] as ObservedRoute);
    if (reason) drift.push({ kind: 'route', name, reason });
  }
  return drift;
}

/** "2 of 2 replicas not running", "1 of 2 replicas not running (1 not answering)", or null. */
function componentDrift(component: ObservedComponent): string | null {
  const total = component.replicas.length;
  let down = 0;
  let silent = 0;
  for (const replica of component.replicas) {
    if (replica.state === 'not_running') down++;
    else if (replica.state === 'not_answering') silent++;
  }
  if (down + silent === 0) return null;
  const counted = `${down + silent} of ${total} replica${total === 1 ? '' : 's'} not running`;
  if (down === 0) return `${silent} of ${total} replica${total === 1 ? '' : 's'} not answering`;
  return silent > 0 ? `${counted} (${silent} not answering)` : counted;
}

function routeDrift(route: ObservedRoute): string | null {
  switch (route.state) {
    case 'served':
    case 'unknown':
      return null;
    case 'not_served':
      return 'route not served';
    case 'address_taken':
      return 'route address held by another program';
    case 'edited':
      return `${route.realisedBy ?? 'nginx file'} edited`;
    default:
      return assertNever(route.state, 'route serving state');
  }
}
