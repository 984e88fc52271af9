import { CutoverError } from '../errors.js';
import type { CurrentLayout } from '../layout.js';
import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { hooksShown } from '../topology/hook-types.js';
import type { Topology } from '../topology/types.js';
import { sha256Digest } from './canonical-json.js';
import {
  type Classification,
  type ComponentFate,
  classify,
  type Forced,
  type RouteFate,
  replaceReason,
} from './classify.js';
import { compareNames, inDependencyOrder, inTeardownOrder } from './dependency-order.js';
import {
  drainReason,
  healthReason,
  newComponentReason,
  replicateReason,
  restartHealthReason,
  shiftReason,
  shiftTogetherReason,
} from './describe-actions.js';
import { describeChange, diffValues } from './diff-values.js';
import { findDrift, type PlanInputs, replacementRequested } from './drift.js';
import { withEdges } from './plan-edges.js';
import { planHooks } from './plan-hooks.js';
import { type PlanHost, planHosts } from './plan-hosts.js';
import { planIdOf } from './plan-id.js';
import { planNotifyTargets } from './plan-notify.js';
import { type PlanStateful, planStateful } from './plan-stateful.js';
import { restartActionId, restartableInPlace, restartReason } from './restart-in-place.js';
import type { Action, Change, Drift, Plan, ResourceChange, Stage } from './types.js';

export type { PlanInputs };

/**
 * plan(current, desired, inputs): pure and deterministic. The same inputs give byte-identical JSON;
 * the same layout on both sides, with nothing drifted, gives no actions. Actions come in stage
 * order; within a stage, green slots come up dependencies first and blue slots go down dependents
 * first, ties broken by name. Drift (what `inputs.observed` shows running otherwise than recorded)
 * and requested replacements force a green-blue replacement of a component the topology keeps, and
 * the re-application of a route; drift of a component no traffic depends on is restarted in place.
 */
export function buildPlan(current: CurrentLayout, desired: Topology, inputs: PlanInputs = {}): Plan {
  const environment = desired.metadata.name;
  if (current.environment !== environment) {
    throw new CutoverError(
      'ENVIRONMENT_MISMATCH',
      `cannot plan environment "${environment}" against the layout of "${current.environment}"`,
    );
  }
  const drift = findDrift(inputs.observed);
  const forced = forcedBy(drift, inputs, current, desired);
  const secrets =
    current.slots || inputs.secrets || inputs.images
      ? { slots: current.slots, digests: inputs.secrets, images: inputs.images }
      : {};
  const c = classify(current.topology, desired, forced, secrets);
  const actions = withEdges(
    [...buildUpActions(c), ...cutoverActions(c), ...teardownActions(c, current.topology)],
    current.topology,
    desired,
    c.currentDependents,
  );
  const resources = resourceChanges(c, actions);
  const settings = settingsChanges(current.topology, desired, c.usedDrivers);
  const body = {
    formatVersion: '1.2' as const,
    environment,
    baseSerial: current.serial,
    // The model's keys are in canonical order by construction (normalize.ts), so plain JSON is canonical.
    desiredDigest: sha256Digest(JSON.stringify(desired)),
    summary: {
      add: resources.filter((r) => r.change === 'add').length,
      change: resources.filter(
        (r) => r.change === 'replace' || r.change === 'restart' || r.change === 'update',
      ).length,
      remove: resources.filter((r) => r.change === 'remove').length,
    },
    resources,
    settings,
    // Only when there is drift: a plan without drift keeps the id it had before drift existed.
    ...(drift.length > 0 ? { drift } : {}),
    actions,
  };
  const planId = planIdOf(body);
  const { formatVersion, baseSerial, desiredDigest, summary } = body;
  return {
    formatVersion,
    environment,
    planId,
    baseSerial,
    desiredDigest,
    summary,
    strategy: {
      commit: desired.strategy.commit,
      bake: formatDuration(desired.strategy.bake),
      ...(desired.strategy.hooks ? { hooks: planHooks(desired.strategy.hooks) } : {}),
    },
    ...(desired.notify === undefined ? {} : { notify: planNotifyTargets(desired.notify) }),
    ...statefulOf(actions, desired, inputs.switchable),
    ...hostsOf(desired),
    resources,
    settings,
    ...(drift.length > 0 ? { drift } : {}),
    actions,
  };
}

/** Plan.hosts, only when the topology places drivers on hosts (other plans keep their JSON). */
function hostsOf(desired: Topology): { hosts?: PlanHost[] } {
  const hosts = planHosts(desired);
  return hosts.length > 0 ? { hosts } : {};
}

/** Plan.stateful, only when the plan replaces a stateful component (other plans keep their JSON). */
function statefulOf(
  actions: readonly Action[],
  desired: Topology,
  switchable: readonly string[] | undefined,
): { stateful?: PlanStateful[] } {
  const stateful = planStateful(actions, desired, switchable);
  return stateful.length > 0 ? { stateful } : {};
}

/**
 * What drift and the operator force: a drifted component is replaced green-blue (its replicas may
 * serve traffic), unless no traffic depends on it and the operator did not ask for a replacement:
 * then it may be restarted in place. A drifted route is re-applied. Drift of what the desired
 * topology removes needs nothing more: it goes anyway.
 */
function forcedBy(
  drift: readonly Drift[],
  inputs: PlanInputs,
  current: CurrentLayout,
  desired: Topology,
): Forced {
  const replace = inputs.replace ?? [];
  const components = new Map<string, string>();
  const routes = new Map<string, string>();
  const restarts = new Map<string, { drift: string; reason: string }>();
  for (const name of replace) {
    if (!own(desired.components, name)) {
      throw new CutoverError(
        'USAGE',
        `--replace ${name}: environment ${desired.metadata.name} has no component ${name}`,
      );
    }
    if (own(current.topology?.components, name)) components.set(name, replacementRequested);
  }
  for (const d of drift) {
    const seen = d.kind === 'component' ? own(inputs.observed?.components, d.name) : undefined;
    if (seen && !replace.includes(d.name) && restartableInPlace(d.name, current.topology, desired)) {
      restarts.set(d.name, { drift: d.reason, reason: restartReason(d.name, seen) });
      continue;
    }
    const map = d.kind === 'component' ? components : routes;
    const before = map.get(d.name);
    map.set(
      d.name,
      before === undefined || before === replacementRequested ? d.reason : `${before}; ${d.reason}`,
    );
  }
  return { components, routes, restarts };
}

function componentAction(
  stage: Stage,
  type: Action['type'],
  component: string,
  reason: string,
  changes?: Change[],
): Action {
  const action: Action = { id: `${stage}:${component}`, stage, type, component, reason };
  if (changes && changes.length > 0) action.changes = changes;
  return action;
}

function routeAction(
  stage: Stage,
  type: Action['type'],
  route: string,
  reason: string,
  changes?: Change[],
): Action {
  const action: Action = { id: `${stage}:route:${route}`, stage, type, route, reason };
  if (changes && changes.length > 0) action.changes = changes;
  return action;
}

/** provision_green, replicate, health_gate: for every component that gets a green slot. */
function buildUpActions(c: Classification): Action[] {
  // Plain loops over the maps: a large layout has many components and most of them are kept.
  const green: string[] = [];
  // forEach, not for-of: no entry pair per component while the code is still cold.
  c.components.forEach((f, name) => {
    if (f.fate === 'add' || f.fate === 'replace' || f.fate === 'restart') green.push(name);
  });
  const ordered = inDependencyOrder(green, c.desiredDepths);
  const provision: Action[] = [];
  const replicate: Action[] = [];
  const gate: Action[] = [];
  for (const name of ordered) {
    const fate = c.components.get(name) as Extract<ComponentFate, { fate: 'add' | 'replace' | 'restart' }>;
    const component = fate.component;
    if (fate.fate === 'restart') {
      provision.push({
        id: restartActionId(name),
        stage: 'provision_green',
        type: 'restart',
        component: name,
        reason: fate.reason,
      });
      gate.push(componentAction('health_gate', 'check_health', name, restartHealthReason(component)));
      continue;
    }
    if (fate.fate === 'add') {
      provision.push(componentAction('provision_green', 'provision', name, newComponentReason(component)));
    } else {
      const reason = replaceReason(fate.changes, fate.replacedDeps, fate.forced, component);
      provision.push(componentAction('provision_green', 'provision', name, reason, fate.changes));
      if (component.stateful && fate.before.stateful) {
        replicate.push(componentAction('replicate', 'replicate', name, replicateReason(name, component)));
      }
    }
    gate.push(componentAction('health_gate', 'check_health', name, healthReason(component)));
  }
  return [...provision, ...replicate, ...gate];
}

/**
 * cutover: new routes, routes whose settings changed, and one shift of every route moving to a green
 * slot: they move together, at the same weight at each step, so a layout with several routes cuts
 * over as one. The shift takes the place of the first route it moves.
 */
function cutoverActions(c: Classification): Action[] {
  const touched = [...c.routes].filter(([, f]) => f.fate === 'add' || f.fate === 'update');
  touched.sort(
    ([a, fa], [b, fb]) =>
      (c.desiredDepths.get(routeTarget(fa)) ?? 0) - (c.desiredDepths.get(routeTarget(fb)) ?? 0) ||
      compareNames(a, b),
  );
  const shifted = touched.filter(
    (entry): entry is [string, Extract<RouteFate, { fate: 'update' }>] =>
      entry[1].fate === 'update' && entry[1].toGreen,
  );
  const actions: Action[] = [];
  for (const [name, fate] of touched) {
    if (fate.fate === 'add') {
      actions.push(
        routeAction('cutover', 'create_route', name, `new route ${fate.route.listen} → ${fate.route.to}`),
      );
    } else if (fate.fate === 'update' && !fate.toGreen) {
      actions.push(routeAction('cutover', 'update_route', name, routeUpdateReason(fate), fate.changes));
    } else if (name === shifted[0]?.[0]) {
      actions.push(shiftAction(shifted));
    }
  }
  return actions;
}

/** The one shift of format 1.2: `cutover:shift`, with the routes it moves. */
function shiftAction(shifted: readonly [string, Extract<RouteFate, { fate: 'update' }>][]): Action {
  // The reason names every hold as the topology writes them, so a change of the holds is not said
  // again after it (routes without holds keep the reasons, and plan ids, they had).
  const more = (u: Extract<RouteFate, { fate: 'update' }>) => {
    const others = u.changes.filter((ch) => ch.path !== 'holds');
    return others.length > 0 || u.drift !== undefined ? routeUpdateReason({ ...u, changes: others }) : '';
  };
  const [only] = shifted;
  let reason: string;
  let changes: Change[];
  if (shifted.length === 1 && only) {
    const [, u] = only;
    reason = `${shiftReason(u.route)}${more(u) ? `; ${more(u)}` : ''}`;
    changes = u.changes;
  } else {
    const extra = shifted.filter(([, u]) => more(u)).map(([name, u]) => `; ${name}: ${more(u)}`);
    reason = `${shiftTogetherReason(shifted.map(([name, u]) => [name, u.route]))}${extra.join('')}`;
    // Each change named by its route: one action carries the changes of several.
    changes = shifted.flatMap(([name, u]) => u.changes.map((ch) => ({ ...ch, path: `${name}.${ch.path}` })));
  }
  const action: Action = {
    id: 'cutover:shift',
    stage: 'cutover',
    type: 'shift_traffic',
    routes: shifted.map(([name]) => name),
    reason,
  };
  if (changes.length > 0) action.changes = changes;
  return action;
}

/** The changed fields, then the drift that makes the route be applied again. */
function routeUpdateReason(fate: Extract<RouteFate, { fate: 'update' }>): string {
  const parts = fate.changes.length > 0 ? [fate.changes.map(describeChange).join(', ')] : [];
  if (fate.drift !== undefined) parts.push(fate.drift);
  return parts.join('; ');
}

function routeTarget(fate: RouteFate): string {
  return fate.fate === 'remove' ? fate.before.to : fate.route.to;
}

/** drain_blue and commit: blue slots of replaced components and removed components and routes. */
function teardownActions(c: Classification, current: Topology | null): Action[] {
  const removedRoutes = [...c.routes]
    .filter(([, f]) => f.fate === 'remove')
    .map(([n]) => n)
    .sort(compareNames);
  const blue: string[] = [];
  c.components.forEach((f, name) => {
    if (f.fate === 'replace' || f.fate === 'remove') blue.push(name);
  });
  const ordered = inTeardownOrder(blue, c.currentDepths);
  const drainTimeouts = drainTimeoutsByComponent(current);
  const drain: Action[] = removedRoutes.map((name) =>
    routeAction('drain_blue', 'remove_route', name, 'route removed from the topology; stop its listener'),
  );
  const commit: Action[] = [];
  for (const name of ordered) {
    const fate = c.components.get(name) as Extract<ComponentFate, { fate: 'replace' | 'remove' }>;
    const removed = fate.fate === 'remove';
    drain.push(
      componentAction('drain_blue', 'drain', name, drainReason(name, drainTimeouts.get(name), removed)),
    );
    if (removed) {
      commit.push(
        componentAction(
          'commit',
          'retire',
          name,
          `retire ${name} (version ${fate.before.version}): removed from the topology`,
        ),
      );
    } else {
      const reason = `retire blue ${name} (version ${fate.before.version}); green (version ${fate.component.version}) is live`;
      commit.push(componentAction('commit', 'retire_blue', name, reason));
    }
  }
  return [...drain, ...commit];
}

/** The longest drain timeout among the current routes to each component. */
function drainTimeoutsByComponent(current: Topology | null): Map<string, number> {
  const out = new Map<string, number>();
  for (const route of Object.values(current?.routes ?? {})) {
    out.set(route.to, Math.max(out.get(route.to) ?? 0, route.drain.timeout));
  }
  return out;
}

function resourceChanges(c: Classification, actions: readonly Action[]): ResourceChange[] {
  const byComponent = new Map<string, string[]>();
  const byRoute = new Map<string, string[]>();
  const add = (map: Map<string, string[]>, key: string, id: string) => {
    const list = map.get(key);
    if (list) list.push(id);
    else map.set(key, [id]);
  };
  for (const a of actions) {
    if (a.component !== undefined) add(byComponent, a.component, a.id);
    else for (const route of a.routes ?? [a.route as string]) add(byRoute, route, a.id);
  }
  const out: ResourceChange[] = [];
  const touched: string[] = []; // kept components have no resource change: leave them out before sorting
  c.components.forEach((f, name) => {
    if (f.fate !== 'keep') touched.push(name);
  });
  for (const name of touched.sort(compareNames)) {
    const fate = c.components.get(name) as ComponentFate;
    const actionsOf = byComponent.get(name) ?? [];
    switch (fate.fate) {
      case 'keep':
        break;
      case 'add':
        out.push({
          kind: 'component',
          name,
          change: 'add',
          reason: newComponentReason(fate.component),
          changes: [],
          actions: actionsOf,
        });
        break;
      case 'restart':
        out.push({
          kind: 'component',
          name,
          change: 'restart',
          reason: fate.reason,
          changes: [],
          actions: actionsOf,
        });
        break;
      case 'replace':
        out.push({
          kind: 'component',
          name,
          change: 'replace',
          reason: replaceReason(fate.changes, fate.replacedDeps, fate.forced, fate.component),
          changes: fate.changes,
          actions: actionsOf,
        });
        break;
      case 'remove':
        out.push({
          kind: 'component',
          name,
          change: 'remove',
          reason: 'removed from the topology',
          changes: [],
          actions: actionsOf,
        });
        break;
    }
  }
  for (const name of [...c.routes.keys()].sort(compareNames)) {
    const fate = c.routes.get(name) as RouteFate;
    const actionsOf = byRoute.get(name) ?? [];
    if (fate.fate === 'add') {
      out.push({
        kind: 'route',
        name,
        change: 'add',
        reason: `new route ${fate.route.listen} → ${fate.route.to}`,
        changes: [],
        actions: actionsOf,
      });
    } else if (fate.fate === 'remove') {
      out.push({
        kind: 'route',
        name,
        change: 'remove',
        reason: 'removed from the topology',
        changes: [],
        actions: actionsOf,
      });
    } else if (fate.fate === 'update' && (fate.changes.length > 0 || fate.drift !== undefined)) {
      out.push({
        kind: 'route',
        name,
        change: 'update',
        reason: routeUpdateReason(fate),
        changes: fate.changes,
        actions: actionsOf,
      });
    }
  }
  return out;
}

/**
 * Environment-wide settings that change without any action: strategy, metadata, and drivers that no
 * component or route uses (a used driver's change shows as the replacement of its components).
 */
function settingsChanges(current: Topology | null, desired: Topology, used: ReadonlySet<string>): Change[] {
  if (!current) return [];
  const unused = (drivers: Topology['drivers']) =>
    Object.fromEntries(Object.entries(drivers).filter(([name]) => !used.has(name)));
  const pick = (t: Topology) => ({
    metadata: t.metadata,
    strategy: shownStrategy(t.strategy),
    drivers: unused(t.drivers),
    // Only when set on a side, so plans of topologies without targets keep their ids.
    ...(t.notify === undefined ? {} : { notify: t.notify }),
  });
  return diffValues(pick(current), pick(desired));
}

/** The strategy as plans may show it: a hook's URL without its credentials or query. */
function shownStrategy(strategy: Topology['strategy']): Topology['strategy'] {
  return strategy.hooks ? { ...strategy, hooks: hooksShown(strategy.hooks) } : strategy;
}
