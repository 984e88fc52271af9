/**
 * The one interface of cutover's operations, whatever runs them: this machine's state directory
 * (local), Temporal (`WORKFLOW_HOST`), or a cutover server (`--server`). Front ends call it and never
 * ask which it is; a verb that cannot work in a mode is refused here, with NOT_SUPPORTED.
 * (The implementations import this file; migration-service.ts picks one of them.)
 */

import type { EnvironmentStatus, EnvironmentSummary } from '../../core/environment-status.js';
import type { CurrentLayout } from '../../core/layout.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type {
  CommitOrigin,
  Lifecycle,
  LogLine,
  MigrationState,
  ResolveHow,
  RolledBackTo,
  Verb,
  VerbOptions,
} from '../../core/migration/types.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { ObservedLayout } from '../../core/observed.js';
import type { PlannedAgainst } from '../../core/plan/saved-plan.js';
import type { Plan } from '../../core/plan/types.js';
import type { Diagnostic } from '../../core/topology/diagnostic.js';
import type { StateDir } from '../store/state-dir.js';

/** `resolve`: run the undo steps left for a person again, or mark them done; one step by its id, or all. */
export interface ResolveRequest {
  how: ResolveHow;
  step?: string;
}

/** A topology given as text, and the name diagnostics use for it (its path, for a file). */
export interface TopologyText {
  text: string;
  file: string;
}

/**
 * A topology to plan or apply: its text, its name, and the directory its relative paths resolve
 * against. The directory is decided once, where the topology enters (engine/sources/topology-source.ts).
 */
export interface TopologySource extends TopologyText {
  baseDir: string;
}

/** What a plan is computed against: the recorded layout, another topology, or nothing live. */
export type PlanAgainst = { kind: 'recorded' } | { kind: 'text'; source: TopologyText } | { kind: 'empty' };

export interface PlanOptions {
  /** false: plan from the record alone, without observing what runs (`--refresh=false`). */
  refresh?: boolean;
  /** Components to replace green-blue with no change (`--replace`). */
  replace?: readonly string[];
}

export type LivePlannedAgainst = Extract<PlannedAgainst, { kind: 'live' }>;

/** A plan against the live layout, and what that layout was (for a saved plan and a plan's header). */
export interface LivePlan {
  plan: Plan;
  against: LivePlannedAgainst;
}

export type ValidateOutcome =
  | { ok: true; environment: string; components: number; routes: number }
  | { ok: false; diagnostics: Diagnostic[] };

export interface StartRequest extends TopologySource {
  planId?: string;
  /**
   * The serial of the live layout the pinned plan was computed against (a saved plan's): refuse
   * as stale, naming both serials and the migration that moved it, when the layout is elsewhere.
   */
  baseSerial?: number;
  /** The Git commit the topology came from (audit); null or absent when unknown. */
  commit?: string | null;
  /** Where `commit` came from (audit). */
  commitFrom?: CommitOrigin;
  /** HEAD of the work tree applied from, when it holds the very text applied (audit). */
  appliedCommit?: string | null;
  /**
   * Who starts it (audit): a server's token name. Absent: the service says who (locally, the OS
   * user); a client of a server cannot name itself, the server does.
   */
  startedBy?: string;
  /** Components to replace green-blue with no change (`migrate --replace`). */
  replace?: readonly string[];
  /** Set by `rollback --to`: the recorded layout this migration goes back to (recorded with it). */
  rolledBackTo?: RolledBackTo;
  /** How many driver calls run at once (`--parallelism`); default: the topology's strategy.parallelism. */
  parallelism?: number;
  /**
   * Start it although no worker polls a host the topology names (`migrate --allow-absent-hosts`,
   * Temporal mode): its calls there wait for one. Without it, such a start is refused.
   */
  allowAbsentHosts?: boolean;
  /**
   * The caller drives it itself with `attach` (the CLI's `migrate` without --detach). Only a local
   * migration runs in the caller's process; elsewhere it runs where it always does.
   */
  attach?: boolean;
}

/** Started, or nothing to change (no migration); `planId`: the plan it was (or would have been) run for. */
export type StartResult =
  | { created: false; planId: string }
  | {
      created: true;
      summary: MigrationSummary;
      planId: string;
      /** Where it runs, for messages: "in the background (pid 12)", "on http://…"; '' in this process. */
      runs: string;
      /** The process driving it, where one is known. */
      runnerPid: number | null;
      /** Something repaired on the way, for the operator. */
      notice?: string;
    };

/** A migration followed (or, locally, driven) from this process until it ends. */
export interface Attached {
  /** Resolves once the migration has ended, or once following it stopped (its summary then). */
  done(): Promise<MigrationSummary>;
  /**
   * This process is going away and the migration goes on without it (a local one in a new
   * background runner). Says where it goes on, for the message.
   */
  leave(): Promise<string>;
}

/** What `cutover topology rollback --to` names: the layout before the current one, the one a migration committed, or a serial. */
export type RollbackTarget =
  | { kind: 'previous' }
  | { kind: 'migration'; id: string }
  | { kind: 'serial'; serial: number };

export interface RollbackRequest {
  to: RollbackTarget;
  /** Where relative paths resolve when the recorded layout names no directory. */
  fallbackBaseDir: string;
}

/** What a rollback would do: its plan, the recorded layout it goes back to, and the serial it leaves. */
export interface RollbackPlan {
  plan: Plan;
  target: { serial: number; migrationId?: string; committedAt?: string };
  currentSerial: number;
}

export interface MigrationService {
  /** Where its migrations are, for messages: a state directory, `WORKFLOW_HOST=…`, or a server's URL. */
  readonly where: string;
  /**
   * The options another `cutover topology migration …` command needs to reach the same
   * migrations, for messages: ` --server URL`, the state directory's option, or '' when the
   * environment (WORKFLOW_HOST) does.
   */
  readonly reachAgain: string;
  /**
   * The address of the server's dashboard (`http://host:7400/ui/`) when this service is a cutover
   * server; absent otherwise. A page of it is this plus `#/migrations/<id>`.
   */
  readonly dashboard?: string;
  /**
   * How often a caller waiting for a change (a migration in flight ending) looks again: what a
   * look costs here (a file read locally, a query to Temporal or a server).
   */
  readonly lookAgainMs: number;
  validate(source: TopologyText): Promise<ValidateOutcome>;
  /** Against the recorded layout, observes what runs first where it can (see PlanOptions). */
  plan(desired: TopologySource, against: PlanAgainst, options?: PlanOptions): Promise<Plan>;
  /**
   * A plan against the live (recorded) layout, with what that layout is: its serial, the migration
   * that recorded it and when (for a saved plan, and a plan's header in words).
   */
  planLive(desired: TopologySource, options?: PlanOptions): Promise<LivePlan>;
  currentLayout(environment: string): Promise<CurrentLayout>;
  /**
   * An earlier layout of the environment by its serial, while it is kept (the last few are; see
   * `cutover topology rollback`); null when it is not. Serial 0 is the empty layout.
   */
  layoutAt(environment: string, serial: number): Promise<CurrentLayout | null>;
  /**
   * What runs of the recorded layout now, as the drivers see it on this machine (pids, ports,
   * routes served). Reads only. Refused (NOT_SUPPORTED) where the drivers' state is elsewhere.
   */
  observe(environment: string): Promise<ObservedLayout>;
  /** Plans, checks a pinned plan, and starts the migration (in the background unless `attach`). */
  start(request: StartRequest): Promise<StartResult>;
  /**
   * `cutover topology rollback`: the plan of going back to the recorded layout `to` names, planned
   * against the current one as `migrate` plans a file.
   */
  planRollback(environment: string, request: RollbackRequest): Promise<RollbackPlan>;
  /** Starts that rollback, an ordinary migration to the recorded layout, as `start` starts one. */
  startRollback(
    environment: string,
    request: RollbackRequest & Pick<StartRequest, 'planId' | 'attach' | 'startedBy'>,
  ): Promise<StartResult>;
  /** Follows a started migration to its end, each log line as it comes (locally, with its state). */
  attach(id: string, onLine: (line: LogLine, state?: MigrationState) => void): Promise<Attached>;
  /** Newest first. */
  list(filter: { environment?: string; state?: Lifecycle }): Promise<MigrationSummary[]>;
  /** A full id, from an id or a unique prefix. */
  find(prefix: string): Promise<string>;
  show(id: string): Promise<{ summary: MigrationSummary; state: MigrationState }>;
  logs(id: string, options: { follow: boolean; signal?: AbortSignal }): AsyncGenerator<LogLine>;
  /**
   * The notifications of every migration, as CloudEvents, from now on until `signal` aborts; with
   * `after` (the id of the last event a client got), first those that came after it.
   */
  events(options: { signal: AbortSignal; after?: string }): AsyncGenerator<CloudEvent>;
  /** options.full: `promote --full` (straight to 100 %); the other verbs take no option. */
  verb(
    id: string,
    verb: Verb,
    by?: string,
    options?: VerbOptions,
  ): Promise<{ summary: MigrationSummary; recovered: boolean }>;
  /**
   * Resolves undo steps left for a person (all, or `step`): `retry` runs them again (the migration
   * rolls back again until they are done), `skip` marks them resolved by `by`. Journaled like a verb.
   */
  resolve(
    id: string,
    request: ResolveRequest,
    by?: string,
  ): Promise<{ summary: MigrationSummary; state: MigrationState }>;
  /** The migration (or take-down) in flight for an environment, if any: its id. */
  inFlight(environment: string): Promise<string | null>;
  /**
   * What runs in an environment beside its record, the migration in flight and the drift
   * (`topology status`, `GET /v1/environments/{name}`). ENVIRONMENT_NOT_FOUND when it was never
   * migrated and nothing is in flight.
   */
  status(environment: string): Promise<EnvironmentStatus>;
  /** Every environment with a record (or a migration in flight), a line of status each, by name. */
  environments(): Promise<EnvironmentSummary[]>;
  /** `topology down`: stops every route and live slot of the environment and records an empty layout. */
  down(environment: string, options: DownOptions): Promise<{ components: string[]; routes: string[] }>;
  /**
   * What `cutover server` runs beside its API: a Temporal worker when `wanted` (local migrations
   * run in their own processes, so nothing). Refused (NOT_SUPPORTED) through another server.
   */
  hostWorker(stateDir: StateDir, wanted: boolean): Promise<HostedWorker>;
  /**
   * For `cutover server`: gives each in-flight migration whose runner died a new background runner
   * (what `resume` does), and says which it adopted. Nothing where migrations have no runner
   * process (Temporal); refused (NOT_SUPPORTED) through another server. `wanted`: which to adopt
   * now, by id (default all).
   */
  adoptOrphans(wanted?: (id: string) => boolean): Promise<Adoption[]>;
  /**
   * For self-heal: keeps the routers this service's migrations started running until `signal`
   * aborts (one killed between migrations is started again at once). Only where the routers are
   * this machine's (local mode); a worker supervises its own in Temporal mode.
   */
  superviseRouters?(options: { signal: AbortSignal; log: (line: string) => void }): Promise<void>;
  close(): Promise<void>;
}

/** A migration found without a live runner by `adoptOrphans`, and what became of it. */
export type Adoption = {
  id: string;
  environment: string;
  /** Its status when found: the lifecycle in words ("running (bake)"). */
  status: string;
  /** The pid of the runner that died, when its record named one. */
  deadPid: number | null;
} & ({ kind: 'adopted'; runnerPid: number } | { kind: 'failed'; error: string });

export interface HostedWorker {
  /** Where migrations run, for the server's first line: "local", "Temporal at WORKFLOW_HOST=…, with a worker". */
  readonly description: string;
  shutdown(): Promise<void>;
}

export interface DownOptions {
  /** Where relative paths resolve when the layout records no directory (the topology file's). */
  fallbackBaseDir: string;
  log: (line: string) => void;
  /** Remove the volumes drivers made for the components too (`--volumes`); else they are kept. */
  volumes?: boolean;
}

/**
 * Follows a migration that runs elsewhere (Temporal, a server) by its log: the `attach` of every
 * mode whose migrations do not run in this process.
 */
export function followElsewhere(
  service: Pick<MigrationService, 'logs' | 'show'>,
  id: string,
  runs: string,
  onLine: (line: LogLine) => void,
): Attached {
  return {
    async done() {
      for await (const line of service.logs(id, { follow: true })) onLine(line);
      return (await service.show(id)).summary;
    },
    leave: async () => runs,
  };
}
