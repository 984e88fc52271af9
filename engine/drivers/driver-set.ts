import { own } from '../../core/records.js';
import {
  type ComponentDriverType,
  isRouteDriverType,
  type RouteDriverType,
  type Topology,
} from '../../core/topology/types.js';
import {
  type ComponentCallContext,
  type ComponentDriver,
  PermanentDriverError,
  type RouteDriver,
} from './types.js';

/** The drivers a runner uses, by driver type. Injected, so tests and Temporal activities share them. */
export interface DriverSet {
  component: Partial<Record<ComponentDriverType, ComponentDriver>>;
  route: Partial<Record<RouteDriverType, RouteDriver>>;
}

/** The driver of a component, or a permanent error saying why there is none. */
export function componentDriverFor(drivers: DriverSet, ctx: ComponentCallContext): ComponentDriver {
  const type = ctx.driver.type;
  if (
    type !== 'process' &&
    type !== 'exec' &&
    type !== 'container' &&
    type !== 'postgres' &&
    type !== 'redis'
  )
    throw new PermanentDriverError(`driver ${ctx.spec.driver} (${type}) cannot run components`);
  const driver = drivers.component[type];
  if (!driver)
    throw new PermanentDriverError(`the ${type} driver is not available in this version of cutover`);
  return driver;
}

/** The driver of a route (the built-in router unless the route names an nginx, haproxy or caddy driver). */
export function routeDriverFor(
  drivers: DriverSet,
  topology: Topology,
  name: string | undefined,
): RouteDriver {
  const type = name === undefined ? 'router' : own(topology.drivers, name)?.type;
  if (!isRouteDriverType(type)) throw new PermanentDriverError(`driver ${name} cannot serve routes`);
  const driver = drivers.route[type];
  if (!driver)
    throw new PermanentDriverError(`the ${type} route driver is not available in this version of cutover`);
  return driver;
}
