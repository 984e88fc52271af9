/**
 * Which host's worker runs a command of a migration (issue 30; pure and deterministic: the
 * workflow calls it). Green lives where the desired topology places its component, blue where the
 * layout the plan was computed against placed it; a route's calls run on its route driver's host.
 * undefined: any worker (nothing placed, or a call that touches no machine: hooks, waits for a
 * retry). A topology without hosts gives undefined for every command: it runs as before hosts.
 */
import { own } from '../records.js';
import { componentHost, routeHost } from '../topology/hosts.js';
import type { Topology } from '../topology/types.js';
import type { Command, MigrationSpec } from './types.js';

export function commandHost(spec: MigrationSpec, command: Command): string | undefined {
  const desired = spec.desired;
  const base = spec.base.topology ?? undefined;
  const green = (component: string) => componentHost(desired, component);
  const blue = (component: string) => (base ? componentHost(base, component) : undefined) ?? green(component);
  const slotHost = (component: string, slot: 'blue' | 'green') =>
    slot === 'blue' ? blue(component) : green(component);
  const route = (name: string) =>
    own(desired.routes, name) !== undefined
      ? routeHost(desired, name)
      : base
        ? routeHost(base, name)
        : undefined;
  switch (command.kind) {
    case 'provision':
    case 'replicate':
    case 'wait_lag':
      return green(command.component);
    case 'check_health':
      return command.slot === 'blue' ? blue(command.component) : green(command.component);
    case 'restart':
    case 'drain':
      return blue(command.component);
    case 'retire':
    case 'fence':
    case 'unfence':
    case 'promote_slot':
      return slotHost(command.component, command.slot);
    case 'catch_up':
      // The other slot applies `from`'s writes.
      return slotHost(command.component, command.from === 'blue' ? 'green' : 'blue');
    case 'reverse_replication':
      return slotHost(command.component, command.from);
    case 'apply_route':
    case 'remove_route':
      return route(command.route);
    case 'shift_routes':
    case 'hold_routes':
      // A shift over several hosts' routes runs as a call per host (migration-workflow.ts routesByHost);
      // a hold's routes run on one host (check-topology.ts, prepare-migration.ts).
      return firstDefined(command.routes.map(route));
    case 'analyze':
      return firstDefined(command.routes.map((r) => route(r.route)));
    case 'wait':
      // A hold or the bake watches green's health: from the host of the first green component placed.
      return command.purpose === 'retry' ? undefined : firstDefined(placedComponents(desired).map(green));
    case 'hook':
    case 'record_layout':
      return undefined;
  }
}

function placedComponents(topology: Topology): string[] {
  return Object.keys(topology.components).sort();
}

function firstDefined(hosts: (string | undefined)[]): string | undefined {
  return hosts.find((h) => h !== undefined);
}
