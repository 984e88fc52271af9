import type { ObservedComponent } from '../observed.js';
import { own } from '../records.js';
import type { Topology } from '../topology/types.js';

/**
 * When drift is repaired in place rather than green-blue. A restart touches the live slot, so it
 * is only for a component on which no traffic depends, in the live layout or the desired one: no
 * route sends to it and no component depends on it. And only on the process driver: the core
 * cannot know what another driver can do in place (an exec script may have no restart), so the
 * plan promises a restart only where the runner can keep it. Whether anything else about the
 * component changed is classify's to say (a change means a green slot anyway).
 */
export function restartableInPlace(name: string, current: Topology | null, desired: Topology): boolean {
  const component = own(desired.components, name);
  if (!component || own(desired.drivers, component.driver)?.type !== 'process') return false;
  return !trafficDependsOn(name, desired) && !(current && trafficDependsOn(name, current));
}

function trafficDependsOn(name: string, topology: Topology): boolean {
  for (const route of Object.values(topology.routes)) if (route.to === name) return true;
  for (const other of Object.values(topology.components)) if (other.dependsOn.includes(name)) return true;
  return false;
}

/** "restart 2 of 2 replicas in place (no traffic depends on web)". */
export function restartReason(name: string, observed: ObservedComponent): string {
  const total = observed.replicas.length;
  const down = observed.replicas.filter(
    (r) => r.state === 'not_running' || r.state === 'not_answering',
  ).length;
  return `restart ${down} of ${total} replica${total === 1 ? '' : 's'} in place (no traffic depends on ${name})`;
}

export function restartActionId(component: string): string {
  return `provision_green:restart:${component}`;
}
