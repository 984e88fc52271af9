/**
 * What one driver call needs of a migration's state. In Temporal mode every activity's input is
 * written to the workflow's history; the whole state holds the plan and both topologies, so a
 * layout of a thousand components made each call's input about 2 MB (Temporal refuses a payload
 * over 2 MB) and the history grew by that much per call. The view keeps the spec's identity and only
 * the components, routes and slots the command touches; `executeCommand` gives the same result on it
 * as on the whole state (a test runs every command of real migrations both ways).
 *
 * Pure and deterministic: the workflow calls it.
 */
import type { CurrentLayout } from '../layout.js';
import type { Plan } from '../plan/types.js';
import { has, own, setOwn } from '../records.js';
import type { Topology } from '../topology/types.js';
import { previewRoutes } from './queries.js';
import type { Command, MigrationState } from './types.js';

export function commandView(state: MigrationState, command: Command): MigrationState {
  const components = new Set<string>();
  const routes = new Set<string>();
  const spec = state.spec;
  const base = spec.base.topology;
  switch (command.kind) {
    case 'provision':
    case 'restart':
      components.add(command.component);
      // Every route's address: a driver choosing a replica's port leaves them out (reservedPorts).
      for (const name of Object.keys(spec.desired.routes)) routes.add(name);
      for (const name of Object.keys(base?.routes ?? {})) routes.add(name);
      break;
    case 'replicate':
    case 'retire':
      components.add(command.component);
      break;
    case 'check_health':
      components.add(command.component);
      for (const name of previewRoutes(state, command.component)) routes.add(name);
      break;
    case 'drain':
      components.add(command.component);
      for (const [name, route] of Object.entries(base?.routes ?? {})) {
        if (route.to === command.component) routes.add(name);
      }
      break;
    case 'apply_route':
    case 'remove_route':
      routes.add(command.route);
      break;
    case 'shift_routes':
    case 'hold_routes':
      for (const name of command.routes) routes.add(name);
      break;
    case 'fence':
    case 'unfence':
    case 'catch_up':
    case 'promote_slot':
    case 'reverse_replication':
    case 'wait_lag':
      components.add(command.component);
      break;
    case 'analyze':
      for (const { route } of command.routes) routes.add(route);
      break;
    case 'wait':
      break;
    case 'record_layout':
      return state; // the layout is the whole state's business
    case 'hook':
      return hookView(state);
  }
  // Holds, the bake, weight changes and the drain look at green's health (engine/health/watch-health.ts).
  if (watchesGreen(command)) {
    for (const name of Object.keys(spec.desired.components)) {
      if (own(state.slots, name)?.green) components.add(name);
    }
  }
  // A component's call reaches the slots of its dependencies (dependency-slots.ts), in either topology.
  const slotsOf = new Set(components);
  for (const name of components) {
    for (const dependency of own(spec.desired.components, name)?.dependsOn ?? []) slotsOf.add(dependency);
    for (const dependency of own(base?.components, name)?.dependsOn ?? []) slotsOf.add(dependency);
  }
  // A route's call needs the slots of its target in either topology.
  for (const name of routes) {
    const before = own(base?.routes, name)?.to;
    const after = own(spec.desired.routes, name)?.to;
    if (before !== undefined) slotsOf.add(before);
    if (after !== undefined) slotsOf.add(after);
  }
  const plan: Plan = { ...spec.plan, resources: [], settings: [], actions: [] };
  return {
    ...state,
    spec: {
      ...spec,
      plan,
      desired: pick(spec.desired, components, routes),
      base: narrowLayout(spec.base, components, routes, slotsOf),
    },
    slots: only(state.slots, slotsOf),
    provisioned: [],
    touchedRoutes: [],
  };
}

function watchesGreen(command: Command): boolean {
  switch (command.kind) {
    case 'wait':
      return command.purpose !== 'retry';
    case 'analyze':
    case 'drain':
      return true;
    case 'apply_route':
    case 'shift_routes':
      return !command.restore && !command.promote && command.greenPercent > 0;
    default:
      return false;
  }
}

/**
 * A hook's call: the spec's identity, its hooks (strategy.hooks, kept with the topology's settings),
 * base.serial, baseDir, and the components with a green slot (their versions in both topologies
 * and the slots): what the hook's context is made of (engine/hooks/hook-command.ts). No plan, no
 * routes, no other component.
 */
function hookView(state: MigrationState): MigrationState {
  const spec = state.spec;
  const green = new Set(Object.keys(spec.desired.components).filter((name) => own(state.slots, name)?.green));
  const none = new Set<string>();
  return {
    ...state,
    spec: {
      ...spec,
      plan: { ...spec.plan, resources: [], settings: [], actions: [] },
      desired: pick(spec.desired, green, none),
      base: narrowLayout(spec.base, green, none),
    },
    slots: only(state.slots, green),
    provisioned: [],
    touchedRoutes: [],
  };
}

/** A layout with only the named components, routes and live slots (for one driver call's input). */
export function narrowLayout(
  layout: CurrentLayout,
  components: ReadonlySet<string>,
  routes: ReadonlySet<string>,
  slots: ReadonlySet<string> = components,
): CurrentLayout {
  const narrowed: CurrentLayout = {
    ...layout,
    topology: layout.topology && pick(layout.topology, components, routes),
  };
  if (layout.slots) narrowed.slots = only(layout.slots, slots);
  return narrowed;
}

/** The topology with only the named components and routes; drivers and settings stay (they are few). */
function pick(topology: Topology, components: ReadonlySet<string>, routes: ReadonlySet<string>): Topology {
  return {
    ...topology,
    components: only(topology.components, components),
    routes: only(topology.routes, routes),
  };
}

function only<T>(record: Record<string, T>, names: ReadonlySet<string>): Record<string, T> {
  const out: Record<string, T> = {};
  for (const name of [...names].sort()) {
    if (has(record, name)) setOwn(out, name, record[name] as T);
  }
  return out;
}
