/**
 * What the nginx, haproxy and caddy route drivers share: a load balancer that cutover configures
 * from its own record of the routes (`{ version: 1, routes }` by `<environment>/<route>`), one call
 * at a time per record, refusing what such a balancer cannot do (hold requests, two routes on one
 * listener). Each driver keeps how it makes its balancer serve a record; the skeleton here is the
 * rest (`managedBalancerDriver`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ObservedRoute } from '../../core/observed.js';
import type { DriverSpec } from '../../core/topology/types.js';
import { readIfExists } from './driver-files.js';
import {
  type DrainResult,
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteDriver,
  type RouteState,
} from './types.js';

export type BalancerName = 'nginx' | 'haproxy' | 'caddy';

/** A route as a balancer driver records it: its listeners, each slot's replicas and the split. */
export interface BalancerRoute {
  environment: string;
  route: string;
  listen: string;
  preview?: string;
  blue: string[];
  green: string[];
  greenPercent: number;
  /** The route's upstreamTimeout; absent: the balancer's default. */
  upstreamTimeoutMs?: number;
  /** The route's bodyTimeout; absent: the balancer's default (caddy leaves it out). */
  bodyTimeoutMs?: number;
}

/** A driver's record of every route it serves from one file or state directory. */
export interface BalancerRecord<Entry extends BalancerRoute> {
  version: 1;
  /** By `<environment>/<route>` (`routeKey`). */
  routes: Record<string, Entry>;
}

export function routeKey(environment: string, route: string): string {
  return `${environment}/${route}`;
}

/** The route as the driver records it; `bodyTimeout` says whether the balancer takes the route's bodyTimeout. */
export function balancerRoute(
  environment: string,
  state: RouteState,
  { bodyTimeout }: { bodyTimeout: boolean },
): BalancerRoute {
  const entry: BalancerRoute = {
    environment,
    route: state.route,
    listen: state.spec.listen,
    blue: state.blue?.addresses ?? [],
    green: state.green?.addresses ?? [],
    greenPercent: state.greenPercent,
  };
  if (state.spec.preview !== undefined) entry.preview = state.spec.preview;
  if (state.spec.upstreamTimeout !== undefined) entry.upstreamTimeoutMs = state.spec.upstreamTimeout;
  if (bodyTimeout && state.spec.bodyTimeout !== undefined) entry.bodyTimeoutMs = state.spec.bodyTimeout;
  return entry;
}

/** The driver's record in `file` (empty when there is none yet); `what` names it in the error. */
export async function readBalancerRecord<Entry extends BalancerRoute>(
  file: string,
  what: string,
): Promise<BalancerRecord<Entry>> {
  const text = await readIfExists(file);
  if (text === null) return { version: 1, routes: {} };
  let parsed: Partial<BalancerRecord<Entry>> | null = null;
  try {
    parsed = JSON.parse(text) as Partial<BalancerRecord<Entry>>;
  } catch {
    // reported below
  }
  if (parsed?.version !== 1 || typeof parsed.routes !== 'object' || parsed.routes === null)
    throw new PermanentDriverError(`${file} is not a ${what} ({version: 1, routes: {...}})`);
  return parsed as BalancerRecord<Entry>;
}

/** A balancer would refuse, or serve from either, two routes on one address: say which route has it. */
export function refuseListenClash(
  record: BalancerRecord<BalancerRoute>,
  key: string,
  entry: BalancerRoute,
): void {
  const mine = [entry.listen, entry.preview].filter((a) => a !== undefined).map((a) => a.toLowerCase());
  for (const [otherKey, other] of Object.entries(record.routes)) {
    if (otherKey === key) continue;
    const clash = [other.listen, other.preview].find(
      (a) => a !== undefined && mine.includes(a.toLowerCase()),
    );
    if (clash)
      throw new PermanentDriverError(`route ${entry.route}: ${clash} is already a listener of ${otherKey}`);
  }
}

/** A route its balancer serves as recorded: the split of the record (`extra`: what else was seen). */
export function servedAsRecorded(
  seen: { route: string; listen: string },
  entry: BalancerRoute,
  extra: Partial<ObservedRoute> = {},
): ObservedRoute {
  return {
    ...seen,
    state: 'served',
    greenPercent: entry.greenPercent,
    blue: entry.blue,
    green: entry.green,
    ...extra,
  };
}

/** The driver's settings of the route's topology, or a permanent error when the call has none of this type. */
export function balancerSpec<Name extends BalancerName>(
  ctx: RouteCallContext,
  name: Name,
  route: string,
): Extract<DriverSpec, { type: Name }> {
  const driver = ctx.driver;
  if (driver?.type !== name)
    throw new PermanentDriverError(`route ${route}: the ${name} driver was called without ${name} settings`);
  return driver as Extract<DriverSpec, { type: Name }>;
}

/** How a balancer driver makes its balancer serve a record; the skeleton does the rest. */
export interface BalancerParts {
  name: BalancerName;
  /** What calls are serialised on: the record's file or directory (one read-modify-write at a time). */
  recordOf(ctx: RouteCallContext, route: string): string;
  /** Puts the routes live together, or none of them. Called one at a time per `recordOf`. */
  applyAll(ctx: RouteCallContext, states: readonly RouteState[], options: DriverCallOptions): Promise<void>;
  /** Takes the route out. Called one at a time per `recordOf`. */
  remove(ctx: RouteCallContext, route: string, options: DriverCallOptions): Promise<void>;
  drain: RouteDriver['drain'];
  observe?: RouteDriver['observe'];
  traffic?: RouteDriver['traffic'];
}

/**
 * A route driver for a balancer: `apply` is `applyAll` of one route; a state with a write hold is
 * refused (a balancer forwards every request it takes: it cannot keep a route's new requests
 * waiting while a stateful component switches, so the switch is refused rather than half done).
 */
export function managedBalancerDriver(parts: BalancerParts): RouteDriver {
  const serialised = serialisedPerKey();
  const applyAll = (ctx: RouteCallContext, states: readonly RouteState[], options: DriverCallOptions) => {
    const held = states.find((state) => state.hold !== undefined);
    if (held)
      return Promise.reject(
        new PermanentDriverError(
          `route ${held.route}: ${parts.name} cannot hold requests, and the switch of stateful component ${held.spec.to} needs a write hold; route it through the built-in router (leave out the route's driver)`,
        ),
      );
    const record = parts.recordOf(ctx, states[0]?.route ?? '');
    return serialised(record, () => parts.applyAll(ctx, states, options));
  };
  const driver: RouteDriver = {
    holds: false,
    apply: (ctx, state, options) => applyAll(ctx, [state], options),
    applyAll,
    remove: (ctx, route, options) =>
      serialised(parts.recordOf(ctx, route), () => parts.remove(ctx, route, options)),
    drain: parts.drain,
  };
  if (parts.observe) driver.observe = parts.observe;
  if (parts.traffic) driver.traffic = parts.traffic;
  return driver;
}

/**
 * Drains by counting: looks at the requests in flight (`inFlight`) every `intervalMs` until there
 * are none or `timeoutMs` passed. null from `inFlight`: the balancer cannot tell, so neither can the drain.
 */
export async function waitNoneInFlight(
  inFlight: () => Promise<number | null>,
  timeoutMs: number,
  intervalMs: number,
  signal: AbortSignal,
): Promise<DrainResult | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal.throwIfAborted();
    const count = await inFlight();
    if (count === null) return null;
    if (count === 0) return { drained: true, inFlight: 0, unit: 'requests' };
    if (Date.now() >= deadline) return { drained: false, inFlight: count, unit: 'requests' };
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())), undefined, { signal });
  }
}

/** Runs the calls given for one key one after another (a failed one does not stop the next). */
function serialisedPerKey(): <T>(key: string, f: () => Promise<T>) => Promise<T> {
  const queues = new Map<string, Promise<unknown>>();
  return <T>(key: string, f: () => Promise<T>): Promise<T> => {
    const next = (queues.get(key) ?? Promise.resolve()).then(f, f);
    queues.set(
      key,
      next.catch(() => undefined),
    );
    return next;
  };
}
