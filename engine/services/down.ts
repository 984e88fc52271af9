/**
 * `cutover topology down`: stops every process and route of an environment and records an empty
 * layout. Idempotent: run again after a crash, it finishes what is left.
 */
import { type DownPart, downFailed, downParts, refuseUnknownEnvironment } from '../../core/down-parts.js';
import { CutoverError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import { liveDependencySlots } from '../../core/migration/dependency-slots.js';
import { own } from '../../core/records.js';
import { resolveReferences } from '../../core/topology/dependency-refs.js';
import { componentDriverFor, type DriverSet, routeDriverFor } from '../drivers/driver-set.js';
import { stopRouterIfIdle } from '../drivers/router-driver.js';
import type {
  ComponentCallContext,
  ComponentDriver,
  DriverCallOptions,
  RouteCallContext,
} from '../drivers/types.js';
import { type ActiveClaim, downClaimId, readClaim, releaseEnvironment } from '../runner/active-claim.js';
import { resolveComponentEnv } from '../secrets/resolve-secrets.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { keptLayouts, readCurrentLayout, recordEmptyLayout } from '../store/layout-store.js';
import type { StateDir } from '../store/state-dir.js';
import { isFinished } from './migration-records.js';
import { conflictError, holdEnvironment } from './migrations.js';
import type { DownOptions } from './service-types.js';

export type { DownPart };

export interface DownResult {
  before: CurrentLayout;
  components: string[];
  routes: string[];
}

export async function takeDown(
  stateDir: StateDir,
  environment: string,
  drivers: DriverSet,
  secrets: ProcessSecrets,
  options: DownOptions,
): Promise<DownResult> {
  // A first migration in flight is named before "never migrated"; an unknown environment is refused
  // before anything is claimed (a claim would make its directory).
  const active = readClaim(stateDir, environment);
  if (
    active &&
    active.migrationId !== downClaimId &&
    isFinished(stateDir, environment, active.migrationId) === false
  )
    throw downConflict(stateDir, environment, active);
  refuseUnknownEnvironment(await readCurrentLayout(stateDir, environment), stateDir.root);
  // down holds the environment's claim, as a migration does, for its whole run: a migration (or a
  // self-heal repair) started meanwhile is refused rather than run beside it, which left processes
  // running that the empty layout recorded after it does not know.
  holdEnvironment(stateDir, environment, downClaimId, (holder) =>
    downConflict(stateDir, environment, holder),
  );
  try {
    return await takeDownClaimed(stateDir, environment, drivers, secrets, options);
  } finally {
    releaseEnvironment(stateDir, environment, downClaimId);
  }
}

function downConflict(stateDir: StateDir, environment: string, holder: ActiveClaim): CutoverError {
  if (holder.migrationId === downClaimId) return conflictError(stateDir, environment, holder);
  const id = holder.migrationId;
  return new CutoverError(
    'MIGRATION_CONFLICT',
    `environment ${environment} has a migration in flight: ${id}; cancel it first (cutover topology migration cancel ${id})`,
  );
}

async function takeDownClaimed(
  stateDir: StateDir,
  environment: string,
  drivers: DriverSet,
  secrets: ProcessSecrets,
  options: DownOptions,
): Promise<DownResult> {
  // Refused before anything stops, rather than ignored when the empty layout is recorded.
  const keep = keptLayouts();
  const layout = await readCurrentLayout(stateDir, environment);
  refuseUnknownEnvironment(layout, stateDir.root);
  const parts = downParts(layout);
  if (!layout.topology) return { before: layout, components: [], routes: [] };
  const withVolumes = options.volumes ? volumeOwners(layout, drivers, options.fallbackBaseDir, stateDir) : [];
  const call = { signal: new AbortController().signal, log: options.log };
  for (const part of parts.order) {
    try {
      await takeDownPart({
        stateDir,
        layout,
        part,
        drivers,
        fallbackBaseDir: options.fallbackBaseDir,
        call,
        secrets,
      });
    } catch (error) {
      throw downFailed(environment, part, error);
    }
  }
  // Before the empty layout is recorded: a down that failed here is run again and finds them.
  for (const { ctx, driver } of withVolumes) {
    try {
      const removed = await driver.removeVolumes?.(ctx, call);
      if (removed && removed.length > 0) options.log(`removed volumes ${removed.join(', ')}`);
    } catch (error) {
      throw downFailed(environment, { component: ctx.component }, error);
    }
  }
  await recordEmptyLayout(stateDir, layout, keep);
  await stopRouterIfIdle(stateDir, options.log);
  return { before: layout, components: parts.components, routes: parts.routes };
}

/** Carries out one part (idempotent: a route or slot already gone is no error to its driver). */
export async function takeDownPart(request: {
  stateDir: StateDir;
  layout: CurrentLayout;
  part: DownPart;
  drivers: DriverSet;
  fallbackBaseDir: string;
  call: DriverCallOptions;
  secrets: ProcessSecrets;
}): Promise<void> {
  const { stateDir, layout, part, drivers, call } = request;
  const topology = layout.topology;
  if (!topology) return;
  const environment = layout.environment;
  const baseDir = layout.baseDir ?? request.fallbackBaseDir;
  if ('route' in part) {
    const driverName = own(topology.routes, part.route)?.driver;
    const ctx: RouteCallContext = { environment, migrationId: 'down', stateDir, baseDir };
    const driverSpec = driverName === undefined ? undefined : own(topology.drivers, driverName);
    if (driverSpec) ctx.driver = driverSpec;
    await routeDriverFor(drivers, topology, driverName).remove(ctx, part.route, call);
    return;
  }
  const name = part.component;
  const spec = own(topology.components, name);
  const slot = own(layout.slots, name);
  const driverSpec = spec ? own(topology.drivers, spec.driver) : undefined;
  if (!spec || !driverSpec || !slot) return;
  const ctx: ComponentCallContext = {
    environment,
    migrationId: 'down',
    component: name,
    spec,
    driver: driverSpec,
    baseDir,
    stateDir,
  };
  // Retiring goes on without a secret that is not set here (as in a migration's undo); a secrets
  // file refused here fails only a driver that passes `env` on (componentEnv), not the others.
  const source = request.secrets.for(baseDir);
  const resolved = await resolveComponentEnv(name, spec, source, { missing: 'omit' }).catch(() => undefined);
  // Its dependencies' live slots, where the layout holds them; a reference without one is left out.
  const dependencies = liveDependencySlots(layout.slots, spec.dependsOn);
  ctx.dependencies = dependencies;
  if (resolved) ctx.env = { ...resolved.env, ...resolveReferences(name, spec, dependencies).env };
  await componentDriverFor(drivers, ctx).retire(ctx, slot, call);
  call.log(`component ${name} stopped`);
}

/**
 * `--volumes`: the components whose drivers keep volumes, each with the context to remove them.
 * Refused before anything stops when no component of the environment has such a driver, rather
 * than reporting a take-down that removed none.
 */
function volumeOwners(
  layout: CurrentLayout,
  drivers: DriverSet,
  fallbackBaseDir: string,
  stateDir: StateDir,
): { ctx: ComponentCallContext; driver: ComponentDriver }[] {
  const topology = layout.topology;
  if (!topology) return [];
  const owners: { ctx: ComponentCallContext; driver: ComponentDriver }[] = [];
  const types = new Set<string>();
  for (const name of Object.keys(topology.components).sort()) {
    const spec = own(topology.components, name);
    const driverSpec = spec ? own(topology.drivers, spec.driver) : undefined;
    if (!spec || !driverSpec) continue;
    types.add(driverSpec.type);
    const ctx: ComponentCallContext = {
      environment: layout.environment,
      migrationId: 'down',
      component: name,
      spec,
      driver: driverSpec,
      baseDir: layout.baseDir ?? fallbackBaseDir,
      stateDir,
    };
    const driver = componentDriverFor(drivers, ctx);
    if (driver.removeVolumes) owners.push({ ctx, driver });
  }
  if (owners.length === 0) {
    throw new CutoverError(
      'USAGE',
      `--volumes: environment ${layout.environment} has no component on a driver with volumes (its drivers: ${[...types].sort().join(', ')}); only container drivers keep volumes: run topology down without --volumes`,
    );
  }
  return owners;
}
