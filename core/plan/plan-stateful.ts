import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { defaults, type Topology } from '../topology/types.js';
import type { Action, PlanStateful } from './types.js';

export type { PlanStateful };

export function planStateful(
  actions: readonly Action[],
  desired: Topology,
  switchable: readonly string[] | undefined,
): PlanStateful[] {
  const out: PlanStateful[] = [];
  for (const action of actions) {
    if (action.type !== 'replicate' || action.component === undefined) continue;
    const spec = own(desired.components, action.component);
    if (!spec?.stateful) continue;
    const maxLag = formatDuration(spec.replicate?.maxLag ?? defaults.replicateMaxLagMs);
    if (switchable?.includes(action.component)) {
      const writeHold = formatDuration(spec.replicate?.writeHold ?? defaults.writeHoldMs);
      out.push({ component: action.component, how: 'switch', writeHold, maxLag });
    } else out.push({ component: action.component, how: 'copy', maxLag });
  }
  return out;
}

/** One sentence per stateful component: what the migration promises of its data. */
export function describeStateful(entry: PlanStateful): string {
  if (entry.how === 'switch')
    return `${entry.component} is switched under a write hold of at most ${entry.writeHold}: green follows blue (lag at most ${entry.maxLag} before traffic moves), blue is fenced and green catches up while the router holds requests, and replication runs back to blue until the commit: no acknowledged write is lost, on the migration or on a rollback before the commit.`;
  return `${entry.component} is copied once, at the replicate stage (its driver cannot follow or fence): writes blue takes after the copy are not carried to green, and a rollback after the shift loses what green took.`;
}
