import type { RouteTraffic } from '../../core/analysis/traffic.js';
import type { Slot, SlotInfo } from '../../core/layout.js';
import type { ObservedReplica, ObservedRoute } from '../../core/observed.js';
import type { DependencySlot } from '../../core/topology/dependency-refs.js';
import type { Component, DriverSpec, Route } from '../../core/topology/types.js';
import type { StateDir } from '../store/state-dir.js';

/** Slots are core types (the layout records them); drivers report them. */
export type { Slot, SlotInfo };

/** Everything a component driver call needs to know: plain data, and the state directory. */
export interface ComponentCallContext {
  environment: string;
  migrationId: string;
  component: string;
  spec: Component;
  driver: DriverSpec;
  /** Directory of the topology file: relative paths in the spec resolve against it. */
  baseDir: string;
  /** The state directory (logs, slot data). */
  stateDir: StateDir;
  /**
   * `spec.env` with its secret references replaced by their values, read by the runner where it
   * runs (engine/secrets/), and its references to dependencies by their addresses (`dependencies`).
   * Never journaled or recorded: it lives for one call.
   */
  env?: Record<string, string>;
  /**
   * The slot of each dependency (`spec.dependsOn`) this call's slot talks to, with its addresses:
   * green reaches the green slots of the dependencies replaced with it, every other call the live
   * ones (core/migration/dependency-slots.ts). The exec driver passes them on in its context.
   */
  dependencies?: Record<string, DependencySlot>;
  /**
   * provision only: the image id (`sha256:…`) the migration's plan resolved the component's `image`
   * to (MigrationSpec.images). A container driver runs exactly this image, so a tag moved between
   * the plan and the provision cannot put another build live unreviewed.
   */
  plannedImageId?: string;
}

export interface DriverCallOptions {
  signal: AbortSignal;
  /** Lines for the migration log (a driver's stderr, progress). */
  log: (line: string) => void;
  /**
   * Records a process group a driver started, so that if cutover dies while it runs, the next
   * runner stops it before running the stage again. Call the returned function once it is gone.
   */
  trackProcess?: (pid: number) => () => void;
}

/** Realises components: stands slots up, copies state, drains and retires them. */
export interface ComponentDriver {
  provision(ctx: ComponentCallContext, slot: Slot, options: DriverCallOptions): Promise<SlotInfo>;
  replicate(
    ctx: ComponentCallContext,
    from: SlotInfo,
    to: SlotInfo,
    options: DriverCallOptions,
  ): Promise<void>;
  /** Blue stops taking new work; resolves once in-flight work is done or the timeout passed. */
  drain(
    ctx: ComponentCallContext,
    slot: SlotInfo,
    timeoutMs: number,
    options: DriverCallOptions,
  ): Promise<void>;
  /** Removes a slot. Idempotent: retiring a slot that is already gone succeeds. */
  retire(ctx: ComponentCallContext, slot: SlotInfo, options: DriverCallOptions): Promise<void>;
  /**
   * Starts again, in the live slot, the replicas that are down; leaves those that run alone.
   * Returns the slot as it is now (new pids, maybe new addresses). Idempotent. Optional: the plan
   * asks it only of the process driver, for a component on which no traffic depends.
   */
  restart?(ctx: ComponentCallContext, slot: SlotInfo, options: DriverCallOptions): Promise<SlotInfo>;
  /**
   * What runs of a slot now, one entry per replica. Reads only: never starts or stops anything.
   * Absent, or a replica it cannot judge: `unknown`, which is never drift.
   */
  observe?(ctx: ComponentCallContext, slot: SlotInfo, options: DriverCallOptions): Promise<ObservedReplica[]>;
  /**
   * Removes the volumes the driver made for the component in the environment, every slot's, and
   * returns their names (`topology down --volumes`). Idempotent. Absent: the driver has no volumes.
   */
  removeVolumes?(ctx: ComponentCallContext, options: DriverCallOptions): Promise<string[]>;
  /**
   * The last `lines` lines each replica of the slot wrote (stdout and stderr), oldest first; quoted
   * in the migration log when the slot fails its health gate. Reads only. Absent: nothing to quote.
   */
  logs?(
    ctx: ComponentCallContext,
    slot: SlotInfo,
    lines: number,
    options: DriverCallOptions,
  ): Promise<ReplicaLog[]>;
}

/** Recent output of one replica: `name` says where it came from (a container's name). */
export interface ReplicaLog {
  replica: number;
  name: string;
  lines: string[];
}

/** The traffic of one route: its settings and how it splits between the slots of its component. */
export interface RouteState {
  route: string;
  spec: Route;
  blue: SlotInfo | null;
  green: SlotInfo | null;
  /** Percent of traffic on green, 0–100. */
  greenPercent: number;
  /**
   * After the commit: `blue` is the green slot this migration brought up, the live slot from now
   * on, and `green` is null. Only for messages; the split is the same as any 0% green.
   */
  promoted?: boolean;
}

export interface RouteCallContext {
  environment: string;
  migrationId: string;
  stateDir: StateDir;
  baseDir: string;
  /** The route's driver settings (an nginx driver's config file); absent for the built-in router. */
  driver?: DriverSpec;
}

/** Realises routes: sets the split of traffic between slots, removes routes. Every call idempotent. */
export interface RouteDriver {
  apply(ctx: RouteCallContext, state: RouteState, options: DriverCallOptions): Promise<void>;
  /**
   * Sets several routes of this driver at once: all of them go live together, or none does (a
   * failure leaves the routes as they were). Absent: the engine applies them one by one.
   */
  applyAll?(ctx: RouteCallContext, states: readonly RouteState[], options: DriverCallOptions): Promise<void>;
  remove(ctx: RouteCallContext, route: string, options: DriverCallOptions): Promise<void>;
  /**
   * Waits until no request of `route` is in flight to any of `addresses` (blue, once traffic left
   * it), each driver in its own way. Resolves at `timeoutMs` with `drained: false` rather than
   * rejecting; rejects only when `options.signal` aborts. null: this driver cannot see requests in
   * flight, so it did not wait.
   */
  drain(
    ctx: RouteCallContext,
    route: string,
    addresses: readonly string[],
    timeoutMs: number,
    options: DriverCallOptions,
  ): Promise<DrainResult | null>;
  /**
   * The route's cumulative requests, 5xx and latency per slot, as the traffic layer counts them
   * (engine/analysis/measure-window.ts takes the difference of two). Absent: this driver does not
   * see the traffic (analysis uses Prometheus checks instead).
   */
  traffic?(ctx: RouteCallContext, route: string, options: DriverCallOptions): Promise<RouteTraffic>;
  /** Whether the route is served as recorded now. Reads only; absent: `unknown`. */
  observe?(
    ctx: RouteCallContext,
    route: string,
    spec: Route,
    options: DriverCallOptions,
  ): Promise<ObservedRoute>;
}

export interface DrainResult {
  drained: boolean;
  /** What is still in flight to those addresses (at the timeout: the last count seen). */
  inFlight: number;
  /** What `inFlight` counts: requests (the router), or nginx workers still finishing theirs. */
  unit?: 'requests' | 'old nginx workers';
}

/** A driver error that retrying will not fix (bad configuration, a script that says so). */
export class PermanentDriverError extends Error {
  override readonly name = 'PermanentDriverError';
}
