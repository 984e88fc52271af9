import type { CurrentLayout, SlotInfo } from '../../core/layout.js';
import { liveDependencySlots } from '../../core/migration/dependency-slots.js';
import type { ObservedComponent, ObservedLayout, ObservedRoute } from '../../core/observed.js';
import { own } from '../../core/records.js';
import type { Route, Topology } from '../../core/topology/types.js';
import { type DriverSet, routeDriverFor } from '../drivers/driver-set.js';
import type { ComponentCallContext, DriverCallOptions, RouteCallContext } from '../drivers/types.js';
import type { StateDir } from '../store/state-dir.js';

/** Longest one driver's observation of one component or route may take; then it is `unknown`. */
export const observeCallTimeoutMs = 10_000;

export interface ObserveOptions {
  drivers: DriverSet;
  /** Where relative paths resolve when the layout records no directory (the topology file's). */
  fallbackBaseDir: string;
  /** Bound of each driver call (default `observeCallTimeoutMs`). */
  callTimeoutMs?: number;
  signal?: AbortSignal;
  /** What drivers say while they look (an observe script's stderr). */
  log?: (line: string) => void;
  now?: () => Date;
}

/**
 * Asks every driver what runs of the recorded layout: the live slot of each component and each
 * route to a component with a live slot, all at once, each call bounded. A driver that cannot tell (no `observe`, an error, the
 * bound passed) reports `unknown` with the reason, which is never drift: observing never fails a
 * plan, and never changes anything.
 */
export async function observeLayout(
  stateDir: StateDir,
  layout: CurrentLayout,
  options: ObserveOptions,
): Promise<ObservedLayout> {
  const observedAt = (options.now?.() ?? new Date()).toISOString();
  const topology = layout.topology;
  const observed: ObservedLayout = {
    environment: layout.environment,
    observedAt,
    components: {},
    routes: {},
  };
  if (!topology) return observed;
  const baseDir = layout.baseDir ?? options.fallbackBaseDir;
  const call = (timeoutMs: number): DriverCallOptions => {
    const bound = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, bound]) : bound;
    return { signal, log: options.log ?? (() => {}) };
  };
  const timeoutMs = options.callTimeoutMs ?? observeCallTimeoutMs;
  const components = Object.keys(topology.components).map(async (name) => {
    const slot = own(layout.slots, name);
    if (!slot) return;
    const ctx = componentContext(stateDir, layout, topology, name, baseDir);
    observed.components[name] = await observeComponent(
      ctx,
      slot,
      options.drivers,
      call(timeoutMs),
      timeoutMs,
    );
  });
  const routes = Object.entries(topology.routes).map(async ([name, spec]) => {
    // A route serves its component's live slot: with none recorded (a layout no driver realised
    // here), there is nothing it should be serving to compare with.
    if (!own(layout.slots, spec.to)) return;
    const ctx: RouteCallContext = {
      environment: layout.environment,
      migrationId: layout.migrationId ?? '',
      stateDir,
      baseDir,
    };
    const driver = spec.driver === undefined ? undefined : own(topology.drivers, spec.driver);
    if (driver) ctx.driver = driver;
    observed.routes[name] = await observeRoute(
      ctx,
      topology,
      name,
      spec,
      options.drivers,
      call(timeoutMs),
      timeoutMs,
    );
  });
  await Promise.all([...components, ...routes]);
  // Keys in name order, whatever order the drivers answered in.
  observed.components = sortedByKey(observed.components);
  observed.routes = sortedByKey(observed.routes);
  return observed;
}

async function observeComponent(
  ctx: ComponentCallContext,
  slot: SlotInfo,
  drivers: DriverSet,
  options: DriverCallOptions,
  timeoutMs: number,
): Promise<ObservedComponent> {
  const seen = { component: ctx.component, slot: slot.slot, version: slot.version };
  const unknown = (detail: string): ObservedComponent => ({
    ...seen,
    replicas: (slot.addresses.length > 0 ? slot.addresses : [null]).map((address) => ({
      address,
      state: 'unknown' as const,
      detail,
    })),
  });
  const type = ctx.driver.type;
  const driver =
    type === 'process' || type === 'exec' || type === 'container' || type === 'postgres' || type === 'redis'
      ? drivers.component[type]
      : undefined;
  if (!driver?.observe) return unknown(`the ${type} driver cannot observe`);
  try {
    return { ...seen, replicas: await bounded(driver.observe(ctx, slot, options), options, timeoutMs) };
  } catch (error) {
    return unknown(failure(error));
  }
}

async function observeRoute(
  ctx: RouteCallContext,
  topology: Topology,
  name: string,
  spec: Route,
  drivers: DriverSet,
  options: DriverCallOptions,
  timeoutMs: number,
): Promise<ObservedRoute> {
  const unknown = (detail: string): ObservedRoute => ({
    route: name,
    listen: spec.listen,
    state: 'unknown',
    detail,
  });
  try {
    const driver = routeDriverFor(drivers, topology, spec.driver);
    if (!driver.observe) return unknown('its driver cannot observe');
    return await bounded(driver.observe(ctx, name, spec, options), options, timeoutMs);
  } catch (error) {
    return unknown(failure(error));
  }
}

/** The driver's answer, or a rejection once the call's signal aborts (its bound passed). */
function bounded<T>(work: Promise<T>, options: DriverCallOptions, timeoutMs: number): Promise<T> {
  const { signal } = options;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error(`no answer within ${timeoutMs} ms`));
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function failure(error: unknown): string {
  return `cannot observe: ${(error as Error)?.message ?? String(error)}`;
}

function componentContext(
  stateDir: StateDir,
  layout: CurrentLayout,
  topology: Topology,
  component: string,
  baseDir: string,
): ComponentCallContext {
  const spec = own(topology.components, component) as Topology['components'][string];
  const driver = own(topology.drivers, spec.driver) as Topology['drivers'][string];
  return {
    environment: layout.environment,
    migrationId: layout.migrationId ?? '',
    component,
    spec,
    driver,
    baseDir,
    stateDir,
    // An observe script gets the component's references as the live slot got them: the live slots.
    dependencies: liveDependencySlots(layout.slots, spec.dependsOn),
  };
}

function sortedByKey<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
