import type { SlotInfo } from '../layout.js';
import { has, own } from '../records.js';
import { dependencyRefsOf, isDependencyRef } from '../topology/dependency-refs.js';
import { isSecretRef } from '../topology/secret-refs.js';
import type { Component, Route, Topology } from '../topology/types.js';
import { byDepth, dependencyGraph } from './dependency-order.js';
import { deepEqual, describeChange, diffValues } from './diff-values.js';
import { type ImageDigests, imageChange, spliceChange } from './image-changes.js';
import { envChanges, type SecretDigests, spliceEnvChanges } from './secret-changes.js';
import type { Change } from './types.js';

/** What happens to one component, and why. */
export type ComponentFate =
  | { fate: 'add'; component: Component }
  | {
      fate: 'replace';
      component: Component;
      before: Component;
      changes: Change[];
      replacedDeps: string[];
      /** Replaced whatever changed: drift observed, or a replacement the operator requested. */
      forced?: string;
    }
  /** Only drift, and no traffic depends on it: its replicas are restarted in the live slot. */
  | { fate: 'restart'; component: Component; reason: string }
  | { fate: 'keep'; component: Component }
  | { fate: 'remove'; before: Component };

export type RouteFate =
  | { fate: 'add'; route: Route }
  | { fate: 'update'; route: Route; changes: Change[]; toGreen: boolean; drift?: string }
  | { fate: 'keep'; route: Route }
  | { fate: 'remove'; before: Route };

export interface Classification {
  components: Map<string, ComponentFate>;
  routes: Map<string, RouteFate>;
  /** Depths in the desired graph: green slots come up dependencies first. */
  desiredDepths: Map<string, number>;
  /** Depths in the current graph: blue slots go down dependents first. */
  currentDepths: Map<string, number>;
  /** The current layout's components that depend on a component (its blue slot goes down after theirs). */
  currentDependents: (name: string) => readonly string[];
  /** Drivers named by a component or route of either layout (gathered here, in the one pass over them). */
  usedDrivers: Set<string>;
}

const noComponents: Readonly<Record<string, Component>> = {};
const noRoutes: Readonly<Record<string, Route>> = {};

/** Why components and routes must be redone although the topology keeps them, by name. */
export interface Forced {
  components: ReadonlyMap<string, string>;
  routes: ReadonlyMap<string, string>;
  /**
   * Drifted components that may be restarted in place (restart-in-place.ts): restarted if nothing
   * else about them changes, else replaced like any drifted component, with `drift` in the reason.
   */
  restarts?: ReadonlyMap<string, { drift: string; reason: string }>;
}

const nothingForced: Forced = { components: new Map(), routes: new Map() };

/**
 * Decides each component's fate. A component gets a green slot when it is new, when any of its
 * fields (or its driver's settings) changed, when it is forced (drift, a requested replacement),
 * or when a dependency gets a green slot: it must be stood up against the new dependency, not the
 * old one. A route is re-applied when it moves to a green slot, changed, or drifted.
 */
/** What tells a changed secret: the digests recorded with the live slots, and the digests now. */
export interface SecretEvidence {
  slots?: Readonly<Record<string, SlotInfo>>;
  digests?: SecretDigests;
  /** The images container components' tags name now, compared with the slots' `imageId`. */
  images?: ImageDigests;
}

export function classify(
  current: Topology | null,
  desired: Topology,
  forced: Forced = nothingForced,
  secrets: SecretEvidence = {},
): Classification {
  const before = current?.components ?? noComponents;
  const desiredGraph = dependencyGraph(desired.components);
  const desiredDepths = desiredGraph.depths;
  // Most plans keep the graph (versions and settings change, dependencies do not): the same depths.
  const currentGraph = sameGraph(before, desired.components) ? desiredGraph : dependencyGraph(before);
  const currentDepths = currentGraph.depths;
  const components = new Map<string, ComponentFate>();
  // Dependencies first, so a dependency's fate is known before its dependents are judged.
  const order = byDepth(desiredDepths);
  const driverChanged = new Map<string, boolean>();
  const usedDrivers = new Set<string>();
  const { slots, images } = secrets;
  for (let k = 0; k < order.length; k++) {
    const name = order[k] as string;
    // A key of desired.components (byDepth of its depths): a plain read is enough, and
    // `__proto__` reads the own value.
    const component = desired.components[name] as Component;
    const old = own(before, name);
    usedDrivers.add(component.driver);
    if (!old) {
      components.set(name, { fate: 'add', component });
      continue;
    }
    usedDrivers.add(old.driver);
    // Most plans have neither (a plan of two texts): no lookup per component then.
    const liveSlot = slots === undefined ? undefined : own(slots, name);
    let changes = componentChanges(current as Topology, desired, old, component, driverChanged, {
      recorded: liveSlot?.secretDigests,
      digests: secrets.digests,
    });
    const image =
      component.image === undefined
        ? null
        : imageChange(
            old,
            component,
            liveSlot?.imageId,
            images === undefined ? undefined : own(images, name),
          );
    if (image) changes = spliceChange(changes, image);
    const replacedDeps: string[] = [];
    const dependsOn = component.dependsOn;
    for (let i = 0; i < dependsOn.length; i++) {
      const f = components.get(dependsOn[i] as string)?.fate;
      if (f === 'replace' || f === 'add') replacedDeps.push(dependsOn[i] as string);
    }
    const restart = forced.restarts?.get(name);
    const changed = changes.length > 0 || replacedDeps.length > 0;
    const why = forced.components.get(name) ?? (changed ? restart?.drift : undefined);
    if (!changed && why === undefined && restart !== undefined) {
      components.set(name, { fate: 'restart', component, reason: restart.reason });
    } else if (changed || why !== undefined) {
      const fate: ComponentFate = { fate: 'replace', component, before: old, changes, replacedDeps };
      if (why !== undefined) fate.forced = why;
      components.set(name, fate);
    } else {
      components.set(name, { fate: 'keep', component });
    }
  }
  for (const name of Object.keys(before)) {
    if (has(desired.components, name)) continue;
    const old = own(before, name) as Component;
    usedDrivers.add(old.driver);
    components.set(name, { fate: 'remove', before: old });
  }
  for (const t of [current, desired]) {
    for (const route of Object.values(t?.routes ?? noRoutes)) {
      if (route.driver !== undefined) usedDrivers.add(route.driver);
    }
  }
  const routes = classifyRoutes(current, desired, components, forced.routes);
  return {
    components,
    routes,
    desiredDepths,
    currentDepths,
    currentDependents: currentGraph.dependentsOf,
    usedDrivers,
  };
}

function componentChanges(
  current: Topology,
  desired: Topology,
  old: Component,
  now: Component,
  driverChanged: Map<string, boolean>,
  secrets: { recorded: Readonly<Record<string, string>> | undefined; digests: SecretDigests | undefined },
): Change[] {
  // Most components of a large layout are unchanged: an equality check is far cheaper than a diff.
  // A plan of two texts gets most of them as the very same model (component-reuse.ts).
  let changes = deepEqual(old, now) ? [] : diffValues(old, now);
  // A secret's value is never diffed (the model does not hold it): its own rules decide `env` then.
  // A dependency's reference is one value to a reviewer, not its `ref` and `format` apart. The same
  // model on both sides can differ only by a secret's value, which needs digests of both times.
  const secretsKnown = secrets.recorded !== undefined && secrets.digests !== undefined;
  if ((now !== old || secretsKnown) && (hasReferences(old) || (now !== old && hasReferences(now)))) {
    changes = spliceEnvChanges(changes, envChanges(old, now, secrets.recorded, secrets.digests));
  }
  if (old.driver !== now.driver) return changes;
  // Many components share a driver: compare its two versions once.
  let changed = driverChanged.get(now.driver);
  if (changed === undefined) {
    changed = !deepEqual(own(current.drivers, old.driver), own(desired.drivers, now.driver));
    driverChanged.set(now.driver, changed);
  }
  if (changed) {
    const driverChanges = diffValues(
      own(current.drivers, old.driver),
      own(desired.drivers, now.driver),
      `drivers.${now.driver}`,
    );
    changes.push(...driverChanges);
  }
  return changes;
}

function hasReferences(component: Component): boolean {
  for (const key in component.env) {
    const value = component.env[key];
    if (isSecretRef(value) || isDependencyRef(value)) return true;
  }
  return false;
}

/** The same components, in the same order, with the same dependencies: so the same dependency depths. */
function sameGraph(a: Readonly<Record<string, Component>>, b: Readonly<Record<string, Component>>): boolean {
  const names = Object.keys(a);
  const others = Object.keys(b);
  if (names.length !== others.length) return false;
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string;
    if (others[i] !== name) return false;
    // Own keys (from Object.keys): a plain read is enough, and `__proto__` reads the own value.
    const x = (a[name] as Component).dependsOn;
    const y = (b[name] as Component).dependsOn;
    if (x === y) continue;
    if (x.length !== y.length) return false;
    for (let j = 0; j < x.length; j++) if (x[j] !== y[j]) return false;
  }
  return true;
}

function classifyRoutes(
  current: Topology | null,
  desired: Topology,
  components: ReadonlyMap<string, ComponentFate>,
  drifted: ReadonlyMap<string, string>,
): Map<string, RouteFate> {
  const before = current?.routes ?? noRoutes;
  const routes = new Map<string, RouteFate>();
  for (const [name, route] of Object.entries(desired.routes)) {
    const old = own(before, name);
    if (!old) {
      routes.set(name, { fate: 'add', route });
      continue;
    }
    const targetFate = components.get(route.to)?.fate;
    const toGreen = targetFate === 'replace' || (targetFate === 'add' && old.to !== route.to);
    const changes = deepEqual(old, route) ? [] : diffValues(old, route);
    const drift = drifted.get(name);
    if (changes.length > 0 || toGreen || drift !== undefined) {
      const fate: RouteFate = { fate: 'update', route, changes, toGreen };
      if (drift !== undefined) fate.drift = drift;
      routes.set(name, fate);
    } else routes.set(name, { fate: 'keep', route });
  }
  for (const name of Object.keys(before)) {
    if (!has(desired.routes, name)) routes.set(name, { fate: 'remove', before: own(before, name) as Route });
  }
  return routes;
}

/**
 * `version 2.0.0 → 2.1.0, replicas 2 → 3 and 2 more changes; dependency db is replaced (env
 * DATABASE_URL refers to it)`, then why it is forced (`2 of 2 replicas not running`), if it is. A
 * replaced dependency that `env` refers to is named with the keys: green gets its new address.
 */
export function replaceReason(
  changes: readonly Change[],
  replacedDeps: readonly string[],
  forced?: string,
  component?: Pick<Component, 'env'>,
): string {
  const parts: string[] = [];
  if (changes.length > 0) {
    const shown = changes.slice(0, 2).map(describeChange).join(', ');
    const more = changes.length - 2;
    parts.push(more > 0 ? `${shown} and ${more} more change${more === 1 ? '' : 's'}` : shown);
  }
  if (replacedDeps.length > 0) {
    const list = replacedDeps.join(', ');
    const replaced =
      replacedDeps.length === 1 ? `dependency ${list} is replaced` : `dependencies ${list} are replaced`;
    const refs = component ? referringKeys(component, replacedDeps) : [];
    parts.push(refs.length > 0 ? `${replaced} (${refs.join('; ')})` : replaced);
  }
  if (forced !== undefined) parts.push(forced);
  return parts.join('; ');
}

/** `env DATABASE_URL refers to it`, or with several dependencies `env A, B refer to db`, per dependency. */
function referringKeys(component: Pick<Component, 'env'>, dependencies: readonly string[]): string[] {
  const refs = dependencyRefsOf(component);
  const out: string[] = [];
  for (const dependency of dependencies) {
    const keys = refs.filter((r) => r.ref === dependency).map((r) => r.key);
    if (keys.length === 0) continue;
    const whom = dependencies.length === 1 ? 'it' : dependency;
    out.push(`env ${keys.join(', ')} ${keys.length === 1 ? 'refers' : 'refer'} to ${whom}`);
  }
  return out;
}
