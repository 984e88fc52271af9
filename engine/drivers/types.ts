import type { RouteTraffic } from '../../core/analysis/traffic.js';
import type { Slot, SlotInfo, WriteHold } from '../../core/layout.js';
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
  /**
   * The ports the topology's routes listen on (`listen` and `preview`, before and after the
   * migration): a driver choosing a port for a replica leaves them out, or the router could not bind
   * a route's address the replica took before it.
   */
  reservedPorts?: ReadonlySet<number>;
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
  /**
   * Continuous replication with a fence (Replicator). Absent: `replicate` copies once, and the
   * switch of a stateful component can promise only what the router's hold gives.
   */
  replication?: Replicator;
}

/**
 * Replication between the two slots of a stateful component (issue 28; DESIGN.md 5a): the initial
 * copy, then following the source continuously; the switch fences the source, reads its position
 * after the fence, waits until the follower applied it, promotes the follower, and starts the
 * reverse direction so a rollback until the commit loses nothing. Every call is idempotent (a
 * runner that crashed calls it again) and honours `options.signal`.
 *
 * Positions are the driver's own (an LSN, an offset, a digest): the engine only journals them and
 * hands them back. `from`/`to` are the slots data flows from and to in that call.
 */
export interface Replicator {
  /** What this driver can promise; the plan says it (a copy-only driver cannot bound lag or fence). */
  readonly capabilities: ReplicationCapabilities;
  /**
   * Whether a component's settings replicate through this Replicator (the process driver's do with
   * `replicate.dataDir`, not with a `replicate.command`). Absent: every stateful component's do.
   */
  supports?(spec: Component): boolean;
  /**
   * The initial copy of `from` into `to`, then `to` follows `from` until `stop` or `promote`.
   * A follow already set up between them is left as it is.
   */
  follow(ctx: ComponentCallContext, from: SlotInfo, to: SlotInfo, options: DriverCallOptions): Promise<void>;
  /** How far `to` trails `from` now. */
  lag(
    ctx: ComponentCallContext,
    from: SlotInfo,
    to: SlotInfo,
    options: DriverCallOptions,
  ): Promise<ReplicationLag>;
  /**
   * No more writes are accepted on `slot`; resolves with its write position read after the fence.
   * A write in progress that does not end by `deadline` (epoch ms) fails the call with a
   * PermanentDriverError naming it (the switch is then undone); the fence is lifted before that.
   */
  fence(
    ctx: ComponentCallContext,
    slot: SlotInfo,
    deadline: number,
    options: DriverCallOptions,
  ): Promise<{ position: ReplicationPosition }>;
  /** Writes are accepted on `slot` again (the switch undone, or a fence left by a crash). */
  unfence(ctx: ComponentCallContext, slot: SlotInfo, options: DriverCallOptions): Promise<void>;
  /**
   * Resolves once `to` has applied everything of `from` up to `position`, with the lag then; fails
   * at `deadline` (epoch ms) with a PermanentDriverError that states the lag left.
   */
  catchUp(
    ctx: ComponentCallContext,
    from: SlotInfo,
    to: SlotInfo,
    position: ReplicationPosition,
    deadline: number,
    options: DriverCallOptions,
  ): Promise<ReplicationLag>;
  /**
   * `slot` takes writes as the primary: it stops following, and what replication does not carry
   * (sequences: set from the data and the old primary's values) is made right.
   */
  promote(ctx: ComponentCallContext, slot: SlotInfo, options: DriverCallOptions): Promise<void>;
  /**
   * `to` (the old primary, fenced) starts following `from` (the new primary) without a copy: the
   * reverse direction, so a rollback before the commit can switch back and lose nothing.
   */
  reverse(ctx: ComponentCallContext, from: SlotInfo, to: SlotInfo, options: DriverCallOptions): Promise<void>;
  /** Ends replication into `to` from `from` and drops what it made (subscriptions, slots, publications). */
  stop(ctx: ComponentCallContext, from: SlotInfo, to: SlotInfo, options: DriverCallOptions): Promise<void>;
}

/** An opaque position in a component's write stream (e.g. a PostgreSQL LSN `0/16B3748`). */
export type ReplicationPosition = string;

export interface ReplicationCapabilities {
  /** `to` follows `from` continuously after the copy (false: one copy, then a final sync under the hold). */
  follow: boolean;
  /** `lag` measures something (false: it reports null for bytes and ms). */
  lag: boolean;
  /** `fence` stops writes at the component itself (false: only the router's hold stops them). */
  fence: boolean;
  /** `reverse` replicates without a copy (false: a rollback's switch copies back under its hold). */
  reverse: boolean;
}

export interface ReplicationLag {
  /** The source's write position. */
  source: ReplicationPosition;
  /** What the follower applied. */
  applied: ReplicationPosition;
  /** Bytes between the two; 0 caught up; null when the driver cannot tell. */
  bytes: number | null;
  /** How long ago the follower's last applied change was written on the source; null when unknown. */
  ms: number | null;
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
  /** A write hold on the route (router/route-table.ts WriteHold); absent: none. */
  hold?: WriteHold;
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
  /**
   * Honours RouteState.hold: holds the route's new requests until a state without it is applied
   * (the built-in router). Absent or false: the driver refuses a state with a hold, and the plan
   * says so before any migration needs one.
   */
  readonly holds?: boolean;
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
   * flight, so it did not wait. A driver that carries upgraded connections (WebSockets) waits for
   * those too and closes them at `timeoutMs` (`closedUpgraded`), unless `upgraded` is 'leave'.
   */
  drain(
    ctx: RouteCallContext,
    route: string,
    addresses: readonly string[],
    timeoutMs: number,
    options: DriverCallOptions,
    upgraded?: 'wait-then-close' | 'leave',
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
  /** Upgraded connections (WebSockets) still open at the timeout, which the router then closed (1001). */
  closedUpgraded?: number;
}

/** A driver error that retrying will not fix (bad configuration, a script that says so). */
export class PermanentDriverError extends Error {
  override readonly name = 'PermanentDriverError';
}
