/**
 * The take-down workflow (`cutover topology down` in Temporal mode). Deterministic code only.
 */
import { getExternalWorkflowHandle, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { type DownPart, downParts } from '../../core/down-parts.js';
import type { CurrentLayout } from '../../core/layout.js';
import { narrowLayout } from '../../core/migration/command-view.js';
import type { LogLine } from '../../core/migration/types.js';
import { componentHost, namedHosts, routeHost } from '../../core/topology/hosts.js';
import type { CutoverActivities } from './activities.js';
import {
  type DownInput,
  type DownOutput,
  environmentWorkflowId,
  hostQueue,
  recordLayoutSignal,
} from './workflow-definitions.js';

const downOptions = {
  // A retire waits for the driver's stop timeout; a worker that dies is noticed by its heartbeats.
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: 5_000,
  retry: {
    initialInterval: 1_000,
    backoffCoefficient: 2,
    maximumInterval: 30_000,
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['InvariantError', 'CutoverError', 'PermanentDriverError'],
  },
};
const downActivities = proxyActivities<CutoverActivities>(downOptions);

/** The activities on a host's queue (hosts.ts); undefined: on any worker. */
function activitiesOn(host: string | undefined): CutoverActivities {
  return host === undefined
    ? downActivities
    : proxyActivities<CutoverActivities>({
        ...downOptions,
        taskQueue: hostQueue(workflowInfo().taskQueue, host),
      });
}

/**
 * `cutover topology down` in Temporal mode: routes first, then each live slot (dependents first),
 * one activity each on any worker (on its host's, when the topology places its driver), then the empty layout recorded. It runs under the environment's
 * migration workflow id, so a migration and a take-down of one environment exclude each other.
 */
export async function downWorkflow(input: DownInput): Promise<DownOutput> {
  const { layout } = input;
  const topology = layout.topology;
  const logs: LogLine[] = [];
  if (!topology) return { components: [], routes: [], logs };
  const { order: parts, components, routes } = downParts(layout);
  // Each part on the host that runs it, when the topology places its driver.
  const hostOf = (part: DownPart) =>
    'route' in part ? routeHost(topology, part.route) : componentHost(topology, part.component);
  for (const part of parts) {
    logs.push(
      ...(await activitiesOn(hostOf(part)).takeDownPart({
        layout: partOf(layout, part),
        part,
        fallbackBaseDir: input.fallbackBaseDir,
      })),
    );
  }
  if (namedHosts(topology).length === 0) logs.push(...(await downActivities.stopRouterIfIdle()));
  else {
    // The router of each host that served a route of the layout.
    const routeHosts = new Set(Object.keys(topology.routes).map((route) => routeHost(topology, route)));
    for (const host of routeHosts) logs.push(...(await activitiesOn(host).stopRouterIfIdle()));
  }
  await getExternalWorkflowHandle(environmentWorkflowId(layout.environment)).signal(recordLayoutSignal, {
    environment: layout.environment,
    serial: layout.serial + 1,
    topology: null,
    committedAt: new Date().toISOString(),
    slots: {},
    migrationId: input.downId,
  });
  return { components, routes, logs };
}

/** The layout with only what one part's driver call reads: its route or its component and slot. */
function partOf(layout: CurrentLayout, part: DownPart): CurrentLayout {
  return 'route' in part
    ? narrowLayout(layout, new Set(), new Set([part.route]))
    : narrowLayout(layout, new Set([part.component]), new Set());
}
