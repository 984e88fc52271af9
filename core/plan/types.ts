import type { PlanHook } from './plan-hooks.js';
import type { PlanHost } from './plan-hosts.js';
import type { PlanNotifyTarget } from './plan-notify.js';

/**
 * A plan is data: what apply will do, in order, and why. It is computed by `buildPlan` alone and
 * must never be used to re-decide at apply time; apply executes the actions as they are.
 */
export const stages = [
  'provision_green',
  'replicate',
  'health_gate',
  'cutover',
  'drain_blue',
  'commit',
] as const;
export type Stage = (typeof stages)[number];

export type ActionType =
  /** provision_green: stand up the green slot of a component beside blue. */
  | 'provision'
  /**
   * provision_green: start again, in the live slot, the replicas of a component that are down, when
   * no traffic depends on it (restart-in-place.ts says when). Nothing to undo: it was down.
   */
  | 'restart'
  /** replicate: copy a stateful component's state from blue to green. */
  | 'replicate'
  /** health_gate: hold everything until the green slot is healthy. */
  | 'check_health'
  /** cutover: create a new route. */
  | 'create_route'
  /**
   * cutover: move routes' traffic to their components' green slots. Format 1.2: one action for every
   * such route (`routes`), all at the same weight at each step. 1.0 and 1.1: one per route (`route`).
   */
  | 'shift_traffic'
  /** cutover: change a route's settings without moving it to a green slot. */
  | 'update_route'
  /** drain_blue: let a blue slot finish in-flight requests, bounded by the drain timeout. */
  | 'drain'
  /** drain_blue: stop a route that is no longer in the topology. */
  | 'remove_route'
  /** commit: retire the blue slot of a replaced component; green is the live slot from here on. */
  | 'retire_blue'
  /** commit: retire a component that is no longer in the topology. */
  | 'retire';

export type SubjectKind = 'component' | 'route';

/** A field-level change. `before` is absent for an added field, `after` for a removed one. */
export interface Change {
  path: string;
  before?: unknown;
  after?: unknown;
  /** A secret is involved: a side that references one holds `(sensitive)`, never the value. */
  sensitive?: true;
}

export interface Action {
  /**
   * Stable and unique: `<stage>:<component>`, `<stage>:route:<route>`, `cutover:shift` (the routes
   * shifted together, format 1.2), or for a restart in place
   * `provision_green:restart:<component>` (a component is either provisioned or restarted, never
   * both, and the id says which).
   */
  id: string;
  stage: Stage;
  type: ActionType;
  component?: string;
  route?: string;
  /** A shift of format 1.2: the routes that move together, in plan order. */
  routes?: string[];
  reason: string;
  changes?: Change[];
  /**
   * The ids of the actions this one waits for (plan-edges.ts), all earlier in the plan: actions
   * whose `after` are done may run at once. Absent in plans of format 1.0, which ran in order.
   */
  after?: string[];
}

/** `restart`: replicas started again in the live slot (no green slot, no traffic moved). */
export type ResourceChangeKind = 'add' | 'replace' | 'restart' | 'update' | 'remove';

/** One component or route that the plan touches, for reviewers: what changes and why. */
export interface ResourceChange {
  kind: SubjectKind;
  name: string;
  change: ResourceChangeKind;
  reason: string;
  changes: Change[];
  /** The action ids carrying out this change, in plan order. */
  actions: string[];
}

/**
 * Something that runs otherwise than the record says, found by observing before planning
 * (Terraform's "objects have changed outside"); the plan's actions repair it.
 */
export interface Drift {
  kind: SubjectKind;
  name: string;
  /** "2 of 2 replicas not running", "route not served", "route address held by another program". */
  reason: string;
}

export interface PlanSummary {
  add: number;
  change: number;
  remove: number;
}

/**
 * How the migration of this plan ends, for reviewers: whether a person commits it, and how long it
 * bakes first. Shown, never decided on: the runner reads the strategy from the desired topology.
 */
export interface PlanStrategy {
  commit: 'auto' | 'manual';
  /** The bake time as a duration (`30s`, `0s`). */
  bake: string;
  /** The hooks the migration runs (plan-hooks.ts); absent without any, so older plans read the same. */
  hooks?: PlanHook[];
}

export interface Plan {
  /**
   * 1.2: one `shift_traffic` action moves every route to green together (`routes`); 1.1: actions
   * carry `after` (their dependency edges), one shift per route; 1.0 (older journals): no edges,
   * run in order. A migration runs its plan by the plan's own format.
   */
  formatVersion: '1.0' | '1.1' | '1.2';
  environment: string;
  /** `sha256:` of the canonical JSON of everything below except planId itself. */
  planId: string;
  /** The serial of the current layout this plan was computed against; a moved serial makes it stale. */
  baseSerial: number;
  /** `sha256:` of the canonical desired topology, so settings-only edits change the plan id too. */
  desiredDigest: string;
  summary: PlanSummary;
  /**
   * Not part of the plan id's hash: the strategy is in the desired topology, which `desiredDigest`
   * already covers, so ids reviewed before this field existed stay valid.
   */
  strategy: PlanStrategy;
  /** Where the migration's events go (plan-notify.ts), when the topology has targets; as `strategy`, not hashed. */
  notify?: PlanNotifyTarget[];
  /**
   * What the migration promises of each stateful component it replaces (plan-stateful.ts): switched
   * under a write hold, or copied once. As `strategy`, not hashed; absent when it replaces none.
   */
  stateful?: PlanStateful[];
  /** Where each component's and route's calls run (plan-hosts.ts), when the topology names hosts; as `strategy`, not hashed. */
  hosts?: PlanHost[];
  resources: ResourceChange[];
  /** Changes to environment-wide settings (strategy, metadata, unused drivers): no action needed.
   * A used driver's change is not repeated here: it shows as the replacement of its components. */
  settings: Change[];
  /** Present only when something drifted, so plans without drift keep their ids byte for byte. */
  drift?: Drift[];
  actions: Action[];
}

export function isEmptyPlan(plan: Plan): boolean {
  return plan.actions.length === 0 && plan.settings.length === 0 && (plan.drift?.length ?? 0) === 0;
}

/**
 * What the plan promises of each stateful component it replaces (issue 28): `switch` when its
 * driver replicates continuously (PlanInputs.switchable): the switch under a write hold loses no
 * acknowledged write, on the migration and on a rollback until the commit; `copy` otherwise: one
 * copy at the replicate stage, which cannot carry what blue takes after it.
 */
export interface PlanStateful {
  component: string;
  how: 'switch' | 'copy';
  /** The hold's budget (switch): how long writes may wait at the router. */
  writeHold?: string;
  maxLag: string;
  /** What the component's driver cannot carry or promise (the redis driver's); absent: nothing to add. */
  limits?: string;
}
