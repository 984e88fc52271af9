import { CutoverError } from '../../core/errors.js';
import type { SlotInfo, WriteHold } from '../../core/layout.js';
import type { ReplicationFigure } from '../../core/migration/replication-lag.js';
import type { Command, MigrationState } from '../../core/migration/types.js';
import { own } from '../../core/records.js';
import type { Route, Topology } from '../../core/topology/types.js';
import { componentEnv } from '../drivers/component-env.js';
import { type DriverSet, routeDriverFor } from '../drivers/driver-set.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteState,
} from '../drivers/types.js';
import { resolveComponentEnv } from '../secrets/resolve-secrets.js';
import { secretHasher } from '../secrets/secret-key.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import type { StateDir } from '../store/state-dir.js';
import { dependencyEnv } from './dependency-env.js';

export interface ExecuteOptions {
  stateDir: StateDir;
  drivers: DriverSet;
  signal: AbortSignal;
  log: (line: string) => void;
  trackProcess?: (pid: number) => () => void;
  /** This process's secrets (decided at its edge); read relative to the migration's topology. */
  secrets: ProcessSecrets;
  /** A switched component's lag as the gate just measured it (throttled): the live figure, kept by the runner. */
  replicationFigure?: (figure: ReplicationFigure) => void;
}

export type RouteSetting = Pick<
  Extract<Command, { kind: 'apply_route' }>,
  'greenPercent' | 'restore' | 'promote'
>;

/** A route's spec on the side a setting reads: the live topology to restore it, else the desired one. */
export function routeSpec(s: MigrationState, route: string, restore: boolean): Route {
  const spec = own(topologyOf(s, restore ? 'base' : 'desired').routes, route);
  if (!spec)
    throw new PermanentDriverError(`route ${route} is not in the ${restore ? 'live' : 'desired'} topology`);
  return spec;
}

/** What a route's driver is asked to serve for a setting of the step function. */
export function routeStateOf(s: MigrationState, route: string, setting: RouteSetting): RouteState {
  const spec = routeSpec(s, route, setting.restore);
  const pair = own(s.slots, spec.to);
  // Undo: everything on the live slot. Promote (after the commit): green is the live slot now.
  const blue = setting.promote ? (pair?.green ?? pair?.blue ?? null) : (pair?.blue ?? null);
  const green = setting.restore || setting.promote ? null : (pair?.green ?? null);
  return {
    route,
    spec,
    blue,
    green,
    greenPercent: setting.greenPercent,
    ...(setting.promote ? { promoted: true } : {}),
  };
}

/**
 * Several routes set at once: one call per route driver, carrying all of that driver's routes (the
 * router writes one table and reloads once; nginx writes one file and reloads once), the drivers
 * called side by side so their switches land as close together as they can. Routes on different
 * drivers are not switched atomically together: each driver's are.
 */
export async function applyRoutes(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  c: RouteSetting & { routes: readonly string[] },
  hold?: WriteHold,
): Promise<void> {
  const side: LayoutSide = c.restore ? 'base' : 'desired';
  const topology = topologyOf(s, side);
  const byDriver = new Map<string | undefined, RouteState[]>();
  for (const route of c.routes) {
    const state = hold ? { ...routeStateOf(s, route, c), hold } : routeStateOf(s, route, c);
    const list = byDriver.get(state.spec.driver);
    if (list) list.push(state);
    else byDriver.set(state.spec.driver, [state]);
  }
  // Every driver's call settles before the command does: a retry or an undo that starts while
  // another driver still writes its file would race it (nginx's sidecar is read-modify-write).
  const settled = await Promise.allSettled(
    [...byDriver].map(async ([driverName, states]) => {
      const driver = routeDriverFor(o.drivers, topology, driverName);
      const ctx = routeContext(s, o, side, driverName);
      if (driver.applyAll) return driver.applyAll(ctx, states, call);
      // A driver that cannot set several routes in one call sets them one after the other.
      for (const state of states) await driver.apply(ctx, state, call);
    }),
  );
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * The layout a driver call acts on: the live one (`base`: its blue slots, the routes it had) or the
 * one being migrated to. Each resolves relative paths in its own directory: a rollback to a layout
 * recorded from another directory must still drain and retire the live slots with their own scripts.
 */
export type LayoutSide = 'base' | 'desired';

export function topologyOf(s: MigrationState, side: LayoutSide): Topology {
  return side === 'base' ? (s.spec.base.topology as Topology) : s.spec.desired;
}

/** The ports the routes of both sides listen on (`listen`, `preview`): no replica is put there. */
export function routePorts(s: MigrationState): ReadonlySet<number> {
  const ports = new Set<number>();
  for (const topology of [s.spec.desired, s.spec.base.topology as Topology | null | undefined]) {
    for (const route of Object.values(topology?.routes ?? {})) {
      for (const address of [route.listen, route.preview]) {
        const port = Number(address?.slice(address.lastIndexOf(':') + 1));
        if (Number.isInteger(port) && port > 0) ports.add(port);
      }
    }
  }
  return ports;
}

/** A layout recorded before layouts kept their directory resolves where the migration's file does. */
export function baseDirOf(s: MigrationState, side: LayoutSide): string {
  return side === 'base' ? (s.spec.base.baseDir ?? s.spec.baseDir) : s.spec.baseDir;
}

/**
 * A driver call's context, with the component's secrets read here, in the process that applies
 * (the runner, the Temporal worker), and its dependencies' addresses in the slots of its generation
 * (dependency-env.ts): their values go to the driver for this call only, and only
 * their keyed hashes are returned, for the slot's record. A secret that cannot be read fails a
 * call that stands green up for good (retrying does not set it); draining and retiring go on
 * without it (`missing: 'omit'`), so an undo or a commit is never held by a secret gone since.
 */
export async function componentContext(
  s: MigrationState,
  o: ExecuteOptions,
  component: string,
  side: LayoutSide,
  missing: 'fail' | 'omit' = 'fail',
): Promise<{ ctx: ComponentCallContext; secretDigests?: Record<string, string> }> {
  const topology = topologyOf(s, side);
  const spec = own(topology.components, component);
  if (!spec) throw new PermanentDriverError(`component ${component} is not in the topology`);
  const driver = own(topology.drivers, spec.driver);
  if (!driver) throw new PermanentDriverError(`driver ${spec.driver} of ${component} is not in the topology`);
  const source = o.secrets.for(s.spec.baseDir);
  const hasher = () => secretHasher(o.stateDir);
  const resolved = await resolveComponentEnv(component, spec, source, { hasher, missing }).catch(
    (error: unknown) => {
      throw error instanceof CutoverError && error.code === 'USAGE'
        ? new PermanentDriverError(error.message)
        : error;
    },
  );
  for (const secret of resolved.omitted ?? []) {
    o.log(`secret ${secret} of ${component} is not set here: its driver goes on without it`);
  }
  const refs = dependencyEnv(s, component, spec, side, missing, o.log);
  const ctx: ComponentCallContext = {
    environment: s.spec.environment,
    migrationId: s.spec.id,
    component,
    spec,
    driver,
    baseDir: baseDirOf(s, side),
    stateDir: o.stateDir,
    env: { ...resolved.env, ...refs.env },
    dependencies: refs.dependencies,
  };
  return resolved.digests ? { ctx, secretDigests: resolved.digests } : { ctx };
}

export function routeContext(
  s: MigrationState,
  o: ExecuteOptions,
  side: LayoutSide,
  driverName: string | undefined,
): RouteCallContext {
  const topology = topologyOf(s, side);
  const ctx: RouteCallContext = {
    environment: s.spec.environment,
    migrationId: s.spec.id,
    stateDir: o.stateDir,
    baseDir: baseDirOf(s, side),
  };
  const driver = driverName === undefined ? undefined : own(topology.drivers, driverName);
  if (driver) ctx.driver = driver;
  return ctx;
}

/** A slot the driver never reported (a crash before it answered): retire it by name. */
export function placeholderSlot(ctx: ComponentCallContext, slot: 'blue' | 'green'): SlotInfo {
  return { component: ctx.component, slot, version: ctx.spec.version, addresses: [] };
}

export function slotEnv(
  ctx: ComponentCallContext,
  slot: SlotInfo | undefined,
  which: 'blue' | 'green',
): Record<string, string> {
  const env: Record<string, string> = {
    ...componentEnv(ctx),
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_MIGRATION_ID: ctx.migrationId,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_SLOT: which,
    CUTOVER_VERSION: ctx.spec.version,
    CUTOVER_STATE_DIR: ctx.stateDir.root,
  };
  const slotId = slot?.details?.slotId;
  if (typeof slotId === 'string') env.CUTOVER_SLOT_ID = slotId;
  return env;
}
