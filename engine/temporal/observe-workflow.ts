/**
 * The observe workflow: one look at what runs, on a worker. Deterministic code only.
 */
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { CurrentLayout } from '../../core/layout.js';
import { narrowLayout } from '../../core/migration/command-view.js';
import type { ObservedLayout } from '../../core/observed.js';
import { componentHost, namedHosts, routeHost } from '../../core/topology/hosts.js';
import type { CutoverActivities, ObserveInput } from './activities.js';
import { hostQueue } from './workflow-definitions.js';

/** One look at what runs: each driver call is bounded by 10 s (observe-layout.ts), all at once. */
export const observeActivityTimeoutMs = 30_000;

const observeOptions = {
  startToCloseTimeout: observeActivityTimeoutMs,
  // A worker that dies mid-look is noticed within this, and another worker looks.
  heartbeatTimeout: 5_000,
  retry: {
    initialInterval: 500,
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['InvariantError', 'CutoverError'],
  },
};
const observeActivities = proxyActivities<CutoverActivities>(observeOptions);

/**
 * `topology status`, a plan's refresh, self-heal: what runs of the recorded layout, observed by a
 * worker, where the drivers' records (the slots' processes, the router) are. Reads only: no
 * driver call changes anything, so a look may be repeated on another worker. A layout whose
 * drivers name hosts is looked at on each host (its components and routes there), all at once.
 */
export async function observeWorkflow(input: ObserveInput): Promise<ObservedLayout> {
  const topology = input.layout.topology;
  if (namedHosts(topology).length === 0 || !topology) return observeActivities.observeLayout(input);
  const parts = new Map<string | undefined, { components: Set<string>; routes: Set<string> }>();
  const partOf = (host: string | undefined) => {
    let part = parts.get(host);
    if (!part) {
      part = { components: new Set(), routes: new Set() };
      parts.set(host, part);
    }
    return part;
  };
  for (const name of Object.keys(topology.components))
    partOf(componentHost(topology, name)).components.add(name);
  for (const name of Object.keys(topology.routes)) partOf(routeHost(topology, name)).routes.add(name);
  const allSlots = new Set(Object.keys(input.layout.slots ?? {}));
  const looks = [...parts].map(([host, part]) => {
    const layout: CurrentLayout = narrowLayout(input.layout, part.components, part.routes, allSlots);
    const activities =
      host === undefined
        ? observeActivities
        : proxyActivities<CutoverActivities>({
            ...observeOptions,
            taskQueue: hostQueue(workflowInfo().taskQueue, host),
          });
    return activities.observeLayout({ ...input, layout });
  });
  const seen = await Promise.all(looks);
  const merged: ObservedLayout = {
    environment: input.layout.environment,
    observedAt: seen.map((s) => s.observedAt).sort()[0] ?? new Date().toISOString(),
    components: {},
    routes: {},
  };
  for (const s of seen) {
    Object.assign(merged.components, s.components);
    Object.assign(merged.routes, s.routes);
  }
  merged.components = sortedByKey(merged.components);
  merged.routes = sortedByKey(merged.routes);
  return merged;
}

function sortedByKey<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
