/**
 * `cutover topology down`: stops every process and route of an environment and records an empty
 * layout. Idempotent: run again after a crash, it finishes what is left.
 */
import path from 'node:path';
import { componentDriverFor, type DriverSet, routeDriverFor } from './drivers/driver-set.js';
import type { ComponentCallContext, RouteCallContext } from './drivers/types.js';
import { CutoverError } from './errors.js';
import type { CurrentLayout } from './layout.js';
import { own } from './records.js';
import { stopRouterIfIdle } from './router/router-driver.js';
import { readClaim } from './runner/active-claim.js';
import { readCurrentLayout, recordEmptyLayout } from './store/layout-store.js';

export interface DownResult {
  before: CurrentLayout;
  components: string[];
  routes: string[];
}

export async function takeDown(
  stateDir: string,
  environment: string,
  drivers: DriverSet,
  options: { fallbackBaseDir: string; log: (line: string) => void },
): Promise<DownResult> {
  const active = readClaim(stateDir, environment);
  if (active) {
    throw new CutoverError(
      'MIGRATION_CONFLICT',
      `environment ${environment} has a migration in flight: ${active.migrationId}; cancel it first (cutover topology migration cancel ${active.migrationId})`,
    );
  }
  const layout = await readCurrentLayout(stateDir, environment);
  const topology = layout.topology;
  if (!topology) return { before: layout, components: [], routes: [] };
  const baseDir = layout.baseDir ?? options.fallbackBaseDir;
  const signal = new AbortController().signal;
  const call = { signal, log: options.log };
  const routes = Object.keys(topology.routes).sort();
  // Traffic first, then what served it.
  for (const route of routes) {
    const driverName = own(topology.routes, route)?.driver;
    const ctx: RouteCallContext = { environment, migrationId: 'down', stateDir, baseDir };
    const driverSpec = driverName === undefined ? undefined : own(topology.drivers, driverName);
    if (driverSpec) ctx.driver = driverSpec;
    await routeDriverFor(drivers, topology, driverName).remove(ctx, route, call);
  }
  const components = Object.keys(topology.components).sort().reverse();
  for (const name of components) {
    const spec = own(topology.components, name);
    const slot = own(layout.slots, name);
    const driverSpec = spec ? own(topology.drivers, spec.driver) : undefined;
    if (!spec || !driverSpec || !slot) continue;
    const ctx: ComponentCallContext = {
      environment,
      migrationId: 'down',
      component: name,
      spec,
      driver: driverSpec,
      baseDir,
      stateDir,
    };
    await componentDriverFor(drivers, ctx).retire(ctx, slot, call);
    options.log(`component ${name} stopped`);
  }
  await recordEmptyLayout(stateDir, layout);
  await stopRouterIfIdle(stateDir, options.log);
  return { before: layout, components: components.reverse(), routes };
}

export function baseDirOf(file: string): string {
  return path.dirname(path.resolve(file));
}
