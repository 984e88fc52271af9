/**
 * The Temporal workflows of cutover's distributed mode (`WORKFLOW_HOST`). Deterministic code only:
 * the migration workflow drives the same pure step function as the local runner; driver calls are
 * activities (as many at once as the step function has in flight), waits are durable timers,
 * operator verbs are Updates with validators, and the status (state and recent log lines) is a
 * Query. The environment workflow keeps the current layout.
 */
import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { type DownPart, downParts } from '../../core/down-parts.js';
import { type CurrentLayout, emptyLayout } from '../../core/layout.js';
import { commandView, narrowLayout } from '../../core/migration/command-view.js';
import { committedLayout } from '../../core/migration/committed-layout.js';
import { refuseResolve } from '../../core/migration/resolve-policy.js';
import { start, step } from '../../core/migration/step.js';
import type { LogLine } from '../../core/migration/types.js';
import {
  type Command,
  isFinal,
  type MigrationEvent,
  type MigrationSpec,
  type MigrationState,
  type ResolveHow,
  type Transition,
  type Verb,
  type VerbOptions,
} from '../../core/migration/types.js';
import { upgradeState } from '../../core/migration/upgrade-state.js';
import { refuseVerb } from '../../core/migration/verb-policy.js';
import { notificationsOf } from '../../core/notify/migration-events.js';
import type { ObservedLayout } from '../../core/observed.js';
import type { CutoverActivities, ObserveInput } from './activities.js';
import { activityTimeoutMs } from './activity-timeouts.js';
import {
  KeptNotifications,
  notificationsPatch,
  notificationsQuery,
  notifyHandOffPatch,
  notifyWorkflowId,
  WorkflowNotifications,
} from './workflow-notify.js';

// Registered with the worker from this module: the child that delivers what a migration's run left.
export { notifyWorkflow } from './workflow-notify.js';

/** A log line with its position, so that a follower asks only for what it has not seen. */
export interface SeqLine extends LogLine {
  seq: number;
}

export interface MigrationStatus {
  state: MigrationState;
  logs: SeqLine[];
}

export interface MigrationInput {
  spec: MigrationSpec;
  /**
   * Set when the workflow continued as new: where it stood. The state goes without its spec (that is
   * `spec` above): the spec holds the plan and both topologies, the bulk of the state, and carried
   * twice it doubled the largest payload of a migration (past Temporal's 2 MB limit on a payload at
   * a few hundred components). An older input with the spec inside is read the same.
   */
  resume?: {
    state: Omit<MigrationState, 'spec'> & { spec?: MigrationSpec };
    logs: SeqLine[];
    seq: number;
    /** The events applied so far (1 = the start): a notification's id carries its event's number. */
    events?: number;
  };
  /**
   * A run started to resolve undo steps left for a person of a migration that had ended (`resume`:
   * where it ended). The resolve Update comes with its start; without one within
   * `resolveWaitMs`, the run ends as the migration had.
   */
  resolving?: true;
}

/** `resolve`: which migration (the workflow id is the environment's), how, one step or all, and who. */
export interface ResolveArgs {
  migrationId: string;
  how: ResolveHow;
  step?: string;
  by?: string;
}

/** The options (`promote --full`) are a third argument, absent from callers before them. */
export const verbUpdate = defineUpdate<MigrationState, [Verb, string | undefined, VerbOptions?]>('verb');
/** Undo steps left for a person: run again or marked done (core/migration/resolve-policy.ts). */
export const resolveUpdate = defineUpdate<MigrationState, [ResolveArgs]>('resolve');
/**
 * How long a resolving run waits for its Update. It comes with the run's first workflow task (an
 * update-with-start), so the wait only bounds a lost or refused one: the run, holding the
 * environment's workflow id, then ends as the migration had.
 */
const resolveWaitMs = 10_000;
/** The state, and the kept log lines after `afterSeq` (0: all kept). */
export const statusQuery = defineQuery<MigrationStatus, [number]>('status');

/** Log lines kept in workflow state; older ones are dropped (the history has everything). */
export const keptLogLines = 1000;
/** Continue as new past this many history events (Temporal's own suggestion comes first). */
const maxHistoryEvents = 5000;

export function environmentWorkflowId(environment: string): string {
  return `cutover-environment-${environment}`;
}

export function migrationWorkflowId(environment: string): string {
  return `cutover-migration-${environment}`;
}

/** Activity options by command: timeouts from the command (activity-timeouts.ts), heartbeats for long calls. */
function activitiesFor(command: Command, spec: MigrationSpec): CutoverActivities {
  return proxyActivities<CutoverActivities>({
    startToCloseTimeout: activityTimeoutMs(command, spec),
    // A worker that dies mid-call is noticed within this, and the call goes to another worker.
    heartbeatTimeout: 5_000,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      initialInterval: 1_000,
      backoffCoefficient: 2,
      maximumInterval: 30_000,
      maximumAttempts: 20,
      nonRetryableErrorTypes: ['InvariantError', 'CutoverError'],
    },
  });
}

/**
 * The marker of runs that start an activity for every command in flight (spec.parallelism); runs
 * recorded without it ran one command at a time and replay so.
 */
export const parallelActivitiesPatch = 'parallel-activities';

/**
 * The marker of runs whose holds and bake are activities that watch green's health while they wait
 * (engine/health/watch-health.ts); runs recorded before it wait on a durable timer and replay so.
 */
export const watchedHoldsPatch = 'watched-holds';

export async function migrationWorkflow(input: MigrationInput): Promise<MigrationStatus> {
  // Every command the step function puts in flight runs as its own activity (or timer), at most
  // `spec.parallelism` at once; each completion is fed back as its event when it comes. A run whose
  // history was recorded by the workflow from before (no marker) replays as it ran: one at a time.
  const parallel = patched(parallelActivitiesPatch);
  const spec: MigrationSpec = parallel ? input.spec : { ...input.spec, parallelism: 1 };
  // A run continued from an earlier version's run carries the state in its older shape.
  let state: MigrationState = input.resume
    ? upgradeState({ ...input.resume.state, spec } as MigrationState)
    : (null as unknown as MigrationState);
  let logs: SeqLine[] = input.resume?.logs ?? [];
  let seq = input.resume?.seq ?? 0;
  const scopes = new Map<string, CancellationScope>();
  let continuing = false;
  // The events applied, counted as the local runner's journal numbers them (1 = the start).
  let events = input.resume?.events ?? 0;

  const log = (line: LogLine) => {
    seq += 1;
    logs.push({ ...line, seq });
    if (logs.length > keptLogLines) logs = logs.slice(logs.length - keptLogLines);
  };
  const publish = () => upsertSearchAttributes({ CutoverState: [state.lifecycle] });

  const apply = (t: Transition, before: MigrationState['lifecycle'] | null) => {
    state = t.state;
    for (const notice of t.notices) log({ ...notice });
    for (const id of t.cancels) scopes.get(id)?.cancel();
    if (state.lifecycle !== before) publish();
    if (
      !isFinal(state.lifecycle) &&
      (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistoryEvents)
    ) {
      if (scopes.size === 0) {
        // Go on in a fresh run, between two commands: what is in `state.inflight` and not yet run
        // is issued there.
        continuing = true;
        return;
      }
      // With several calls in flight there may never be a moment with none: new commands wait (in
      // `state.inflight`, for the next run) while those running end. A run of the workflow from
      // before ran them at once, and so replays.
      if (parallel) return;
    }
    for (const command of t.commands) dispatch(command);
  };

  // Deliveries beside the migration, when its topology has targets. Runs recorded before them
  // (no marker) replay without any.
  const targets = spec.desired.notify ?? {};
  const notifications =
    Object.keys(targets).length > 0 && patched(notificationsPatch)
      ? new WorkflowNotifications(targets, spec.baseDir, log)
      : null;
  const kept = new KeptNotifications();
  const notify = (before: MigrationState | null, event: MigrationEvent) => {
    const out = notificationsOf(before, event, state, events);
    kept.add(events, out);
    notifications?.publish(out);
  };

  const record = (event: MigrationEvent) => {
    // A resolve is the one event of a migration that has ended (a retry makes it roll back again).
    if ((isFinal(state.lifecycle) && event.type !== 'resolve') || continuing) return;
    const before = state;
    events += 1;
    apply(step(state, event), state.lifecycle);
    notify(before, event);
  };

  const dispatch = (command: Command) => {
    const started = Date.now();
    const scope = new CancellationScope();
    scopes.set(command.id, scope);
    void scope
      .run(async () => {
        // A hold or the bake watches green's health, in an activity; runs recorded before the patch
        // (and every retry's wait) keep their durable timer.
        if (command.kind === 'wait' && (command.purpose === 'retry' || !patched(watchedHoldsPatch))) {
          await sleep(command.ms);
          return { event: { type: 'command_succeeded' } as const, lines: [] as LogLine[] };
        }
        if (command.kind === 'record_layout') {
          await getExternalWorkflowHandle(environmentWorkflowId(state.spec.environment)).signal(
            recordLayoutSignal,
            committedLayout(state),
          );
          return { event: { type: 'command_succeeded' } as const, lines: [] as LogLine[] };
        }
        // Only what this call needs: the whole state would go into the history with every call.
        const outcome = await activitiesFor(command, state.spec).runCommand(
          commandView(state, command),
          command,
        );
        return { event: outcome.result, lines: outcome.lines };
      })
      .then(
        ({ event, lines }) => {
          scopes.delete(command.id);
          for (const line of lines) log(line);
          record({ ...event, at: Date.now(), commandId: command.id } as MigrationEvent);
        },
        (error: unknown) => {
          scopes.delete(command.id);
          if (isCancellation(error)) {
            record({
              type: 'command_cancelled',
              at: Date.now(),
              commandId: command.id,
              elapsedMs: Date.now() - started,
            });
          } else {
            const message =
              error instanceof Error
                ? ((error.cause as Error | undefined)?.message ?? error.message)
                : String(error);
            record({
              type: 'command_failed',
              at: Date.now(),
              commandId: command.id,
              error: { message, retryable: true },
            });
          }
        },
      );
  };

  setHandler(notificationsQuery, (afterEvent: number) => kept.after(afterEvent));
  setHandler(statusQuery, (afterSeq: number) => ({
    state,
    logs: logs.filter((l) => l.seq > afterSeq),
  }));
  setHandler(
    verbUpdate,
    (verb: Verb, by: string | undefined, options?: VerbOptions) => {
      const event: MigrationEvent = { type: 'operator', at: Date.now(), verb };
      if (by !== undefined) event.by = by;
      if (verb === 'promote' && options?.full) event.full = true;
      record(event);
      return state;
    },
    {
      validator: (verb: Verb, _by: string | undefined, _options?: VerbOptions) => {
        const refusal = continuing
          ? 'the migration is moving to a new workflow run; retry'
          : refuseVerb(state, verb);
        if (refusal !== null) throw new Error(refusal);
      },
    },
  );

  let resolved = false;
  setHandler(
    resolveUpdate,
    (args: ResolveArgs) => {
      const event: MigrationEvent = { type: 'resolve', at: Date.now(), how: args.how };
      if (args.step !== undefined) event.step = args.step;
      if (args.by !== undefined) event.by = args.by;
      record(event);
      resolved = true;
      return state;
    },
    {
      validator: (args: ResolveArgs) => {
        // Sent with a start that found this environment's workflow running: another migration's.
        const refusal =
          args.migrationId !== state.spec.id
            ? `cannot resolve ${args.migrationId}: ${state.spec.id} is in flight in ${state.spec.environment}; resolve once it has ended`
            : continuing
              ? 'the migration is moving to a new workflow run; retry'
              : refuseResolve(state, args.step);
        if (refusal !== null) throw new Error(refusal);
      },
    },
  );

  if (input.resume) {
    const cancelling = state.inflight.filter((c) => state.cancelling.includes(c.id));
    for (const command of state.inflight) if (!cancelling.includes(command)) dispatch(command);
    for (const command of cancelling) {
      record({ type: 'command_cancelled', at: Date.now(), commandId: command.id, elapsedMs: 0 });
    }
  } else {
    const t = start(spec);
    state = t.state;
    events = 1;
    apply(t, null);
    notify(null, { type: 'created', at: spec.createdAt, spec });
  }

  // Only runs started to resolve wait here: the command sequence of every other run is unchanged.
  if (input.resolving) await condition(() => resolved, resolveWaitMs);
  await condition(() => isFinal(state.lifecycle) || continuing);
  // The deliveries not done go on in a child workflow of their own: this run, holding the
  // environment's workflow id, ends as soon as its state is final. Runs recorded before the
  // hand-off (no marker) replay the bounded wait they had.
  if (notifications?.busy()) {
    if (patched(notifyHandOffPatch)) await notifications.handOff(notifyWorkflowId(spec.id, events));
    else await notifications.settle();
  }
  if (continuing) {
    const { spec, ...rest } = state;
    await continueAsNew<typeof migrationWorkflow>({ spec, resume: { state: rest, logs, seq, events } });
  }
  return { state, logs };
}

export const recordLayoutSignal = defineSignal<[CurrentLayout]>('recordLayout');
export const layoutQuery = defineQuery<CurrentLayout>('layout');
/** An earlier layout, while kept (to tell a stale plan from a different one). */
export const layoutAtQuery = defineQuery<CurrentLayout | null, [number]>('layoutAt');
/**
 * How many earlier layouts an environment keeps unless told otherwise: the process that starts a
 * migration sends its CUTOVER_KEEP_LAYOUTS (keepLayoutsSignal), since a workflow cannot read the
 * environment. The same default as local mode's (engine/store/layout-store.ts).
 */
export const defaultKeptLayouts = 20;
/**
 * …and at most this much of them as JSON (about 0.4 MB once compressed): they go into the workflow's
 * continue-as-new input, which Temporal refuses over 2 MB. Large layouts keep fewer earlier ones.
 */
const keptLayoutsChars = 8_000_000;

/** The earlier layouts to keep once `previous` is replaced: newest last, bounded in count and size. */
export function keepEarlier(
  earlier: readonly CurrentLayout[],
  previous: CurrentLayout,
  size: (layout: CurrentLayout) => number = (l) => JSON.stringify(l).length,
  keep: number = defaultKeptLayouts,
): CurrentLayout[] {
  const kept = [...earlier, previous].slice(-keep);
  let total = 0;
  let from = kept.length;
  while (from > 0) {
    total += size(kept[from - 1] as CurrentLayout);
    if (total > keptLayoutsChars) break;
    from--;
  }
  return kept.slice(from);
}

export interface EnvironmentInput {
  environment: string;
  layout?: CurrentLayout;
  earlier?: CurrentLayout[];
  /** How many earlier layouts to keep (CUTOVER_KEEP_LAYOUTS of the last starter); default 20. */
  keep?: number;
}

/**
 * CUTOVER_KEEP_LAYOUTS of the process starting a migration (sent with every start, so the last
 * starter's setting holds): applied, like local mode's, when the next layout is recorded.
 */
export const keepLayoutsSignal = defineSignal<[number]>('keepLayouts');

/**
 * One per environment, running for as long as the environment exists: the current layout, durable
 * in Temporal and the same for every server and worker. A migration's commit signals the layout it
 * leaves; a repeated signal of the same migration changes nothing.
 */
export async function environmentWorkflow(input: EnvironmentInput): Promise<void> {
  let layout = input.layout ?? emptyLayout(input.environment);
  let earlier = input.earlier ?? [];
  let keep = input.keep ?? defaultKeptLayouts;
  // Each layout's size is measured once (a layout of 10,000 components is 5 MB of JSON).
  let sizes = new Map<number, number>(); // by serial
  const sizeOf = (l: CurrentLayout) => {
    let n = sizes.get(l.serial);
    if (n === undefined) {
      n = JSON.stringify(l).length;
      sizes.set(l.serial, n);
    }
    return n;
  };
  setHandler(layoutQuery, () => layout);
  setHandler(layoutAtQuery, (serial: number) =>
    serial === layout.serial ? layout : (earlier.find((l) => l.serial === serial) ?? null),
  );
  setHandler(keepLayoutsSignal, (n: number) => {
    // Checked by the sender; a bad number from elsewhere must not empty the record.
    if (Number.isInteger(n) && n >= 1) keep = n;
  });
  setHandler(recordLayoutSignal, (next: CurrentLayout) => {
    if (next.migrationId !== undefined && next.migrationId === layout.migrationId) return;
    if (next.serial !== layout.serial + 1) return;
    earlier = keepEarlier(earlier, layout, sizeOf, keep);
    sizes = new Map(earlier.map((l) => [l.serial, sizeOf(l)]));
    layout = next;
  });
  await condition(
    () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistoryEvents,
  );
  await continueAsNew<typeof environmentWorkflow>({ environment: input.environment, layout, earlier, keep });
}

export interface DownInput {
  /** The layout to take down, as the environment workflow had it when the caller asked. */
  layout: CurrentLayout;
  /** Recorded with the empty layout: a repeated signal of the same take-down changes nothing. */
  downId: string;
  fallbackBaseDir: string;
}

export interface DownOutput {
  components: string[];
  routes: string[];
  logs: LogLine[];
}

const downActivities = proxyActivities<CutoverActivities>({
  // A retire waits for the driver's stop timeout; a worker that dies is noticed by its heartbeats.
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: 5_000,
  retry: {
    initialInterval: 1_000,
    backoffCoefficient: 2,
    maximumInterval: 30_000,
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['InvariantError', 'CutoverError', 'PermanentDriverError'],
  },
});

/**
 * `cutover topology down` in Temporal mode: routes first, then each live slot (dependents first),
 * one activity each on any worker, then the empty layout recorded. It runs under the environment's
 * migration workflow id, so a migration and a take-down of one environment exclude each other.
 */
export async function downWorkflow(input: DownInput): Promise<DownOutput> {
  const { layout } = input;
  const topology = layout.topology;
  const logs: LogLine[] = [];
  if (!topology) return { components: [], routes: [], logs };
  const { order: parts, components, routes } = downParts(layout);
  for (const part of parts) {
    logs.push(
      ...(await downActivities.takeDownPart({
        layout: partOf(layout, part),
        part,
        fallbackBaseDir: input.fallbackBaseDir,
      })),
    );
  }
  logs.push(...(await downActivities.stopRouterIfIdle()));
  await getExternalWorkflowHandle(environmentWorkflowId(layout.environment)).signal(recordLayoutSignal, {
    environment: layout.environment,
    serial: layout.serial + 1,
    topology: null,
    committedAt: new Date().toISOString(),
    slots: {},
    migrationId: input.downId,
  });
  return { components, routes, logs };
}

/** The layout with only what one part's driver call reads: its route or its component and slot. */
function partOf(layout: CurrentLayout, part: DownPart): CurrentLayout {
  return 'route' in part
    ? narrowLayout(layout, new Set(), new Set([part.route]))
    : narrowLayout(layout, new Set([part.component]), new Set());
}

/** One look at what runs: each driver call is bounded by 10 s (observe-layout.ts), all at once. */
export const observeActivityTimeoutMs = 30_000;

const observeActivities = proxyActivities<CutoverActivities>({
  startToCloseTimeout: observeActivityTimeoutMs,
  // A worker that dies mid-look is noticed within this, and another worker looks.
  heartbeatTimeout: 5_000,
  retry: {
    initialInterval: 500,
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['InvariantError', 'CutoverError'],
  },
});

/**
 * `topology status`, a plan's refresh, self-heal: what runs of the recorded layout, observed by a
 * worker, where the drivers' records (the slots' processes, the router) are. Reads only: no
 * driver call changes anything, so a look may be repeated on another worker.
 */
export async function observeWorkflow(input: ObserveInput): Promise<ObservedLayout> {
  return observeActivities.observeLayout(input);
}

export function observeWorkflowId(environment: string, lookId: string): string {
  return `cutover-observe-${environment}-${lookId}`;
}
