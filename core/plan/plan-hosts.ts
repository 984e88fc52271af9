/**
 * Where the migration's calls run, when the topology places drivers on hosts (core/topology/hosts.ts):
 * every component and route with its host, in name order. Absent from plans of topologies without
 * hosts, so their JSON stays as it was.
 */
import { componentHost, namedHosts, routeHost } from '../topology/hosts.js';
import type { Topology } from '../topology/types.js';

export interface PlanHost {
  kind: 'component' | 'route';
  name: string;
  /** The host whose worker runs its calls; absent: any worker. */
  host?: string;
  /** false: no worker polled the host when the plan was made (Temporal mode); a migration would wait for one. */
  polled?: false;
}

export function planHosts(desired: Topology): PlanHost[] {
  if (namedHosts(desired).length === 0) return [];
  const at = (kind: PlanHost['kind'], name: string, host: string | undefined): PlanHost =>
    host === undefined ? { kind, name } : { kind, name, host };
  return [
    ...Object.keys(desired.components)
      .sort()
      .map((name) => at('component', name, componentHost(desired, name))),
    ...Object.keys(desired.routes)
      .sort()
      .map((name) => at('route', name, routeHost(desired, name))),
  ];
}

/** "component web on b, route www on a, component worker on any worker" */
export function describePlanHosts(hosts: readonly PlanHost[]): string {
  return hosts.map((h) => `${h.kind} ${h.name} on ${h.host ?? 'any worker'}`).join(', ');
}

/** The hosts no worker polled when the plan was made, in name order. */
export function absentPlanHosts(hosts: readonly PlanHost[] | undefined): string[] {
  const absent = new Set<string>();
  for (const h of hosts ?? []) if (h.polled === false && h.host !== undefined) absent.add(h.host);
  return [...absent].sort();
}
