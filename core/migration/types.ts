import type { SlotFigures, VerdictOutcome } from '../analysis/verdict.js';
import type { CurrentLayout, SlotInfo } from '../layout.js';
import type { ImageDigests } from '../plan/image-changes.js';
import type { RouteAnalysis } from '../plan/shift-steps.js';
import type { Plan, Stage } from '../plan/types.js';

export type { RouteAnalysis };

import type { HookPoint } from '../topology/hook-types.js';
import type { Topology } from '../topology/types.js';

/**
 * Lifecycle of a migration. `running`, `paused`, `awaiting_promotion` (a shift step with
 * `hold: manual`), `awaiting_commit`, `committing` and `rolling_back` are in flight; `completed`, `rolled_back`, `cancelled` and `failed` are final.
 * `committing` is past the point of no return.
 */
export type Lifecycle =
  | 'running'
  | 'paused'
  | 'awaiting_promotion'
  | 'awaiting_commit'
  | 'committing'
  | 'rolling_back'
  | 'completed'
  | 'rolled_back'
  | 'cancelled'
  | 'failed';

export const finalLifecycles: readonly Lifecycle[] = ['completed', 'rolled_back', 'cancelled', 'failed'];

export function isFinal(lifecycle: Lifecycle): boolean {
  return finalLifecycles.includes(lifecycle);
}

export type Verb = 'pause' | 'resume' | 'rollback' | 'cancel' | 'commit' | 'promote';
export const verbs: readonly Verb[] = ['pause', 'resume', 'rollback', 'cancel', 'commit', 'promote'];

/** What a verb may carry besides who gave it: `promote --full`. */
export interface VerbOptions {
  full?: boolean;
}

/** How a migration that does not complete ends. */
export type Outcome = 'rolled_back' | 'cancelled' | 'failed';

/**
 * Where a migration's recorded commit came from: a saved plan's `commit` (`plan --commit`, or the
 * topology file's clean HEAD when it was saved), `migrate --commit`, or a server request's `commit`.
 */
export type CommitOrigin = 'saved_plan' | 'option' | 'request';

/** Fixed when the migration is created; journaled as the first event. */
export interface MigrationSpec {
  id: string;
  environment: string;
  plan: Plan;
  desired: Topology;
  /** The layout the plan was computed against, with its live slots. */
  base: CurrentLayout;
  /** Directory of the topology file: relative paths in it resolve against this. */
  baseDir: string;
  createdAt: number;
  /** Who started it (audit): a server's token name, or the OS user. Absent in older journals. */
  startedBy?: string;
  /** The Git commit its topology came from (audit): a saved plan's, or `migrate --commit`; null when unknown. */
  commit?: string | null;
  /** Where `commit` came from. Absent in older journals, and when no commit was given. */
  commitFrom?: CommitOrigin;
  /**
   * HEAD of the Git work tree the topology was applied from, when its file there was tracked, clean
   * and the very text applied (after a merge, the merge on main): the commit that was applied, beside
   * the one planned. null when there is none; absent in older journals and through a remote server.
   */
  appliedCommit?: string | null;
  /**
   * How many commands may be in flight at once (`--parallelism`, else the topology's
   * `strategy.parallelism`, else 10). Absent in journals written before it: those ran one at a
   * time, and replaying them must issue the same commands, so absent means 1.
   */
  parallelism?: number;
  /**
   * The image id each container component's `image` named when the plan was computed (see
   * ImageDigests): provision runs that image, never what the tag names later. Absent in older
   * journals and for images not resolved (not in the engine's store, `pull: always`).
   */
  images?: ImageDigests;
  /**
   * The stateful components this migration switches under a write hold (issue 28): their drivers
   * replicate continuously (engine/drivers/types.ts Replicator), so the shift of every route that
   * reaches them is a switch (hold, fence blue, catch up, promote green, reverse, release to green),
   * and a rollback after it is the same in reverse. Decided when the migration is created, from the
   * drivers; absent in older journals (and none): shifts are as they were.
   */
  switched?: string[];
  /**
   * A migration made by `cutover topology rollback --to`: the recorded layout it goes back to (its
   * serial, and the migration that recorded it, when one did). Absent for a forward migration and
   * in older journals.
   */
  rolledBackTo?: RolledBackTo;
}

/** The recorded layout a rollback migration goes back to. */
export interface RolledBackTo {
  serial: number;
  migrationId?: string;
}

/** A command for the edge: a driver call or a wait. Serialisable; results come back as events. */
export type Command =
  | { id: string; kind: 'provision'; component: string }
  | { id: string; kind: 'replicate'; component: string }
  /** Start again the replicas of the component's live slot that are down (a restart in place). */
  | { id: string; kind: 'restart'; component: string }
  /** slot: `blue`, the live slot, after a restart in place; absent: the green slot. */
  /**
   * betweenSteps: the check between two shift steps, with real traffic already on green; the gate's
   * look through each preview listener (which opens the route to green at 0 %) is not repeated.
   */
  | {
      id: string;
      kind: 'check_health';
      component: string;
      deadlineMs: number;
      slot?: 'blue';
      betweenSteps?: true;
    }
  /** restore: the live settings, all on blue (undo). promote: after the commit, green is the live slot. */
  | {
      id: string;
      kind: 'apply_route';
      route: string;
      greenPercent: number;
      restore: boolean;
      promote?: boolean;
    }
  /**
   * Several routes set at once, all at `greenPercent` (one router reload, one nginx reload per
   * driver): a step of a shift of format 1.2, or, with restore, every route put back on blue; with
   * promote, green is each route's live slot after the commit.
   */
  | {
      id: string;
      kind: 'shift_routes';
      routes: string[];
      greenPercent: number;
      restore: boolean;
      promote?: boolean;
    }
  | { id: string; kind: 'remove_route'; route: string }
  | { id: string; kind: 'drain'; component: string; timeoutMs: number }
  | { id: string; kind: 'retire'; component: string; slot: 'blue' | 'green' }
  /** hold: a shift step's dwell (`hold: 2m`), the weight set, before the next step. */
  | { id: string; kind: 'wait'; ms: number; purpose: 'bake' | 'retry' | 'hold' }
  /**
   * A shift step's hold with analysis: `ms` of each route's traffic measured (through its route
   * driver, or its Prometheus checks) and judged; the result comes back on the event (`analysis`).
   */
  | { id: string; kind: 'analyze'; weight: number; ms: number; routes: RouteAnalysis[] }
  /** The hook `index` of `strategy.hooks[point]` (named `name`), run once to a verdict (runHook). */
  | { id: string; kind: 'hook'; point: HookPoint; index: number; name: string; weight?: number }
  /**
   * The switch (core/migration/switch.ts). hold_routes: the routes hold new requests where they are
   * (`greenPercent`), and the requests in flight to the side being left (`from`) finish, within
   * `budgetMs`; its result says when the hold began (`heldAt`). The other steps must end by
   * `deadline` (epoch ms: the hold's start plus its budget), or the switch is undone.
   */
  | {
      id: string;
      kind: 'hold_routes';
      routes: string[];
      greenPercent: number;
      from: 'blue' | 'green';
      budgetMs: number;
      maxHeld: number;
    }
  | { id: string; kind: 'fence'; component: string; slot: 'blue' | 'green' }
  | { id: string; kind: 'unfence'; component: string; slot: 'blue' | 'green' }
  /** The other slot applies `from`'s writes up to the position its fence reported (state.switch). */
  | { id: string; kind: 'catch_up'; component: string; from: 'blue' | 'green' }
  | { id: string; kind: 'promote_slot'; component: string; slot: 'blue' | 'green' }
  /** The slot `from` (the new primary) replicates into the other, without a copy. */
  | { id: string; kind: 'reverse_replication'; component: string; from: 'blue' | 'green' }
  /**
   * The health gate found green trailing blue by more than `replicate.maxLag` (its check's result
   * carried `lagging`): wait until it trails by at most that, for at most `timeoutMs`
   * (`replicate.timeout`), then the gate passes; past it, the gate fails naming the lag.
   */
  | { id: string; kind: 'wait_lag'; component: string; timeoutMs: number }
  | { id: string; kind: 'record_layout' };

export type CommandKind = Command['kind'];

/** One route's verdict over a hold. */
export interface RouteVerdict {
  route: string;
  outcome: VerdictOutcome;
  reason: string;
  green?: SlotFigures;
  blue?: SlotFigures;
}

/**
 * What an `analyze` command found. Invariant: `breach` when any route breached; else
 * `inconclusive` when any route had too little traffic (the hold was extended once and it still
 * had); else `pass`. `reason` names each route's verdict with its figures.
 */
export interface AnalysisResult {
  outcome: VerdictOutcome;
  reason: string;
  routes: RouteVerdict[];
}

/** An analysis as the migration keeps it (status, show, the API): its result, when, at which step. */
export interface AnalysisRecord extends AnalysisResult {
  at: number;
  weight: number;
}

/** What a step of the switch reports (command_succeeded.switched). */
export interface SwitchResult {
  /** fence: the fenced slot's write position, read after the fence. */
  position?: string;
  /** hold_routes: when the router held the first request (epoch ms; the budget counts from it). */
  heldAt?: number;
  /** catch_up: the lag when the follower had applied the position (bytes; null: unknown). */
  lagBytes?: number | null;
  /**
   * The release of a hold (the routes set without it): requests the router held, summed over the
   * routes, when it could tell (absent from an older router, or none running).
   */
  heldCount?: number;
}

/**
 * A switched component's replication lag as the health gate measured it: on a `check_health`
 * that found green trailing by more than maxLag (`lagging`), and on the `wait_lag` that ended
 * with it within. Journaled once per episode, never per poll (the live figure is not journaled:
 * ReplicationFigure).
 */
export interface LagReport {
  component: string;
  /** How far green trails in time (ms), and in bytes of the log; null when the driver cannot tell. */
  lagMs: number | null;
  lagBytes: number | null;
  maxLagMs: number;
}

/**
 * Where the switch of a migration's stateful components stands (absent: no switch began). The
 * forward switch moves writes to green; after it, until the commit, a rollback switches back.
 */
export interface SwitchState {
  /** Which way the switch in progress (or the last one) went. */
  direction: 'to_green' | 'to_blue';
  /** The hold in effect: when it began. */
  heldAt: number;
  /** How long it may last (the smallest `replicate.writeHold` of the components switched). */
  budgetMs: number;
  /** Positions read after each fence, by component. */
  positions: Record<string, string>;
  /** Slots fenced now, as `component/slot`. */
  fenced: string[];
  /** The slot that takes writes, by component, once promoted. */
  primary: Record<string, 'blue' | 'green'>;
  /** Traffic was released to the new primary: the switch is over. */
  released: boolean;
}

export interface CommandError {
  message: string;
  /** A transient error: worth retrying with backoff. */
  retryable: boolean;
  /**
   * Green lost its health after its gate (watched during a hold or the bake, checked before a
   * weight change or the drain): the migration rolls back at once, `rolled_back`.
   */
  unhealthy?: true;
}

/** What happened. The journal is a list of these; the state is a fold over them. */
export type MigrationEvent =
  | { type: 'created'; at: number; spec: MigrationSpec }
  | {
      type: 'command_succeeded';
      at: number;
      commandId: string;
      output?: SlotInfo;
      /** An `analyze` command's result. */
      analysis?: AnalysisResult;
      /** A switch step's result: a fence's position, a hold's start, a catch-up's lag. */
      switched?: SwitchResult;
      /** A gate's lag check (check_health beyond maxLag, wait_lag within it): see LagReport. */
      lagging?: LagReport;
    }
  | { type: 'command_failed'; at: number; commandId: string; error: CommandError }
  | { type: 'command_cancelled'; at: number; commandId: string; elapsedMs: number }
  /** full: a `promote --full`, straight to the last step (100 %). */
  | { type: 'operator'; at: number; verb: Verb; by?: string; full?: boolean }
  /** A person resolves undo steps left for them (all, or the one `step` names): see resolve-policy.ts. */
  | { type: 'resolve'; at: number; how: ResolveHow; step?: string; by?: string };

/** retry: run the skipped undo steps again; skip: a person says they are done (by hand). */
export type ResolveHow = 'retry' | 'skip';

/** Typed notices for subscribers (log, live view, metrics, SSE); derived, never journaled. */
export interface Notice {
  at: number;
  kind: NoticeKind;
  level: 'info' | 'warn' | 'error';
  message: string;
  stage?: Stage | 'bake';
  actionId?: string;
}

export type NoticeKind =
  | 'migration_started'
  | 'stage_entered'
  | 'action_started'
  | 'action_succeeded'
  | 'action_retry'
  | 'action_failed'
  | 'gate_passed'
  | 'gate_failed'
  | 'paused'
  | 'resumed'
  | 'traffic_step'
  | 'awaiting_promotion'
  | 'promoted'
  | 'analysis_passed'
  | 'analysis_failed'
  | 'hook_passed'
  | 'hook_failed'
  | 'awaiting_commit'
  | 'committing'
  | 'completed'
  | 'rollback_started'
  | 'rollback_step'
  | 'write_hold_started'
  | 'write_hold_ended'
  | 'replication_lagging'
  | 'replication_caught_up'
  /** Temporal mode: the migration is started, and no worker polls its task queue to run it yet. */
  | 'waiting_for_worker'
  | 'ended';

export interface SlotPair {
  blue?: SlotInfo;
  green?: SlotInfo;
}

export interface Ending {
  outcome: Outcome;
  reason: string;
  /** Undo steps, in order: traffic back to blue first, then green removed. */
  steps: Command[];
  /** Index of the first step not finished (every step before it is finished). */
  cursor: number;
  /**
   * Plan format 1.2: the steps run as a graph (undo-order.ts), up to `spec.parallelism` at once.
   * Indexes of the steps finished (done, or skipped for a person), ascending. Absent in journals
   * before it: their steps run one at a time, at `cursor`, with the state's `attempt`.
   */
  finished?: number[];
  /** Steps started and not finished, with their attempt and their command in flight (the step, or the wait before retrying it; null between two). */
  running?: UndoRun[];
  /** Steps that kept failing and were skipped: they need a person (until resolved). */
  skipped: SkippedStep[];
}

export interface UndoRun {
  index: number;
  attempt: number;
  command: string | null;
}

/** An undo step that kept failing, left for a person. */
export interface SkippedStep {
  /** The command as it was issued; its id names the step (`resolve --step c12`). */
  command: Command;
  /** What it was, for people: "retire green api". */
  what: string;
  /** The last error. */
  error: string;
  /** While a `resolve --retry` runs it again: the id of that command, and who asked. */
  retrying?: { as: string; by?: string };
  /** Once a person resolved it: run again until it succeeded, or marked done by hand. */
  resolved?: { how: 'retried' | 'skipped'; at: number; by?: string };
}

/** An action started and not done yet. */
export interface ActionRun {
  /** Index in spec.plan.actions. */
  index: number;
  /** Position inside a multi-step action (the steps of a stepped shift). */
  subStep: number;
  attempt: number;
  /** Deadline left of a health gate interrupted by a pause. */
  gateRemainingMs: number | null;
  /** Its command in flight (the driver call, or the wait before retrying it); null between two. */
  command: string | null;
}

export interface MigrationState {
  spec: MigrationSpec;
  lifecycle: Lifecycle;
  /** Index in spec.plan.actions of the first action not done (every action before it is done). */
  cursor: number;
  /** Indexes in spec.plan.actions of the actions done, ascending. */
  done: number[];
  /** Actions started and not done, by index ascending. */
  running: ActionRun[];
  /** Attempt of the one command that belongs to no action (the commit's steps, an undo step). */
  attempt: number;
  pauseRequested: boolean;
  /**
   * The commands the edge is executing, in the order issued; at most `spec.parallelism` of them.
   * Each is an action's command (see `running`), or the one command of the bake, the commit's
   * steps or the rollback, which run alone.
   */
  inflight: Command[];
  /** Commands of this migration that were cancelled and whose result is awaited. */
  cancelling: string[];
  nextCommand: number;
  slots: Record<string, SlotPair>;
  /** Routes this migration changed, in order, so a rollback can put them back. */
  touchedRoutes: string[];
  /** Components whose green slot was (or may have been) started, in plan order. */
  provisioned: string[];
  bakeRemainingMs: number | null;
  bakeDone: boolean;
  layoutRecorded: boolean;
  /** Routes whose green slot was made their live slot during the commit. */
  routesPromoted: number;
  /** The switch of the stateful components (absent: none began; and in states from before it). */
  switch?: SwitchState;
  /** The analyses of shift holds, in the order they ended (absent in states from before them). */
  analyses?: AnalysisRecord[];
  /** How many confirmPromotion hooks passed, and how many postRollout hooks ran (absent: none). */
  hooksRun?: { confirmPromotion: number; postRollout: number };
  ending: Ending | null;
  startedAt: number;
  updatedAt: number;
  committedAt: number | null;
  endedAt: number | null;
  lastError: string | null;
}

export interface Transition {
  state: MigrationState;
  /** Commands to start. */
  commands: Command[];
  /** Ids of in-flight commands to abort (a pause or rollback interrupting a wait or a gate). */
  cancels: string[];
  notices: Notice[];
}

/** A line of a migration's log: a notice of the engine or a line a driver printed. */
export interface LogLine {
  at: number;
  level: Notice['level'];
  /** driver: a line a driver printed; notify: a notification delivery's result (engine/notify/). */
  kind: Notice['kind'] | 'driver' | 'notify';
  message: string;
  stage?: string;
  actionId?: string;
}
