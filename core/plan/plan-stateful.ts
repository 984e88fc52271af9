import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { type Component, defaults, type Topology } from '../topology/types.js';
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
      const limits = driverLimits(desired, spec);
      out.push({
        component: action.component,
        how: 'switch',
        writeHold,
        maxLag,
        ...(limits === undefined ? {} : { limits }),
      });
    } else out.push({ component: action.component, how: 'copy', maxLag });
  }
  return out;
}

/**
 * What a switched component's driver cannot carry, for its Stateful line: the redis driver's (fsync
 * policy, what a fence holds and refuses, what replication does not carry).
 */
function driverLimits(desired: Topology, spec: Component): string | undefined {
  const driver = own(desired.drivers, spec.driver);
  if (driver?.type !== 'redis') return undefined;
  const fsync =
    driver.appendfsync === 'always'
      ? "each write is fsync'd to the append-only file before its reply (appendfsync always)"
      : "the append-only file is fsync'd each second (appendfsync everysec: a crash of the machine may lose the last second of writes; the switch itself loses none)";
  return `Redis: a write counts once the server replied; ${fsync}. Keys keep their expiry time (expiry and eviction wait while blue is fenced). A command, Lua script or MULTI/EXEC that reaches blue while it is fenced waits, then is refused (READONLY): the client must retry it on green; a script still running past the hold's budget undoes the switch. Pub/Sub messages and blocked clients (BLPOP…) are not carried.`;
}

/** One sentence per stateful component (and its driver's limits): what the migration promises of its data. */
export function describeStateful(entry: PlanStateful): string {
  const text = describePromise(entry);
  return entry.limits === undefined ? text : `${text} ${entry.limits}`;
}

function describePromise(entry: PlanStateful): string {
  if (entry.how === 'switch')
    return `${entry.component} is switched under a write hold of at most ${entry.writeHold}: green follows blue (lag at most ${entry.maxLag} before traffic moves), blue is fenced and green catches up while the router holds requests, and replication runs back to blue until the commit: no acknowledged write is lost, on the migration or on a rollback before the commit.`;
  return `${entry.component} is copied once, at the replicate stage (its driver cannot follow or fence): writes blue takes after the copy are not carried to green, and a rollback after the shift loses what green took.`;
}
