/**
 * The migration workflow: drives the same pure step function as the local runner. Driver calls
 * are activities (as many at once as the step function has in flight), waits are durable timers,
 * operator verbs are Updates with validators, and the status (state and recent log lines) is a
 * Query. Deterministic code only.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { commandHost } from '../../core/migration/command-host.js';
import { commandView } from '../../core/migration/command-view.js';
import { committedLayout } from '../../core/migration/committed-layout.js';
import {
  carryOut,
  operatorEvent,
  pickUp,
  resolveEvent,
  type StepHost,
} from '../../core/migration/host-step.js';
import { refuseResolve } from '../../core/migration/resolve-policy.js';
import { start, step } from '../../core/migration/step.js';
import {
  type Command,
  isFinal,
  type LogLine,
  type MigrationEvent,
  type MigrationSpec,
  type MigrationState,
  type Transition,
  type Verb,
  type VerbOptions,
} from '../../core/migration/types.js';
import { upgradeState } from '../../core/migration/upgrade-state.js';
import { refuseVerb } from '../../core/migration/verb-policy.js';
import { notificationsOf } from '../../core/notify/migration-events.js';
import { switchEventNames } from '../../core/notify/types.js';
import { formatDuration } from '../../core/topology/duration.js';
import type { CommandOutcome, CutoverActivities } from './activities.js';
import { activityTimeoutMs } from './activity-timeouts.js';
import {
  environmentWorkflowId,
  hostQueue,
  keptLogLines,
  type MigrationInput,
  type MigrationStatus,
  maxHistoryEvents,
  type ResolveArgs,
  recordLayoutSignal,
  resolveUpdate,
  type SeqLine,
  statusQuery,
  verbUpdate,
} from './workflow-definitions.js';
import {
  KeptNotifications,
  notificationsPatch,
  notificationsQuery,
  notifyHandOffPatch,
  notifyWorkflowId,
  switchNotificationsPatch,
  WorkflowNotifications,
} from './workflow-notify.js';

/**
 * How long a resolving run waits for its Update. It comes with the run's first workflow task (an
 * update-with-start), so the wait only bounds a lost or refused one: the run, holding the
 * environment's workflow id, then ends as the migration had.
 */
const resolveWaitMs = 10_000;
/**
 * Activity options by command: timeouts from the command (activity-timeouts.ts), heartbeats for long
 * calls, and the queue of the host that owns the call's machine when the topology places it
 * (command-host.ts); a call placed nowhere goes to the shared queue, as every call did before hosts.
 */
function activitiesFor(command: Command, spec: MigrationSpec, undoing = false): CutoverActivities {
  const host = commandHost(spec, command);
  const timeoutMs = activityTimeoutMs(command, spec);
  return proxyActivities<CutoverActivities>({
    // A placed call waits in its host's queue for that host's worker at most `strategy.hostWait`,
    // else as long as the call may run: then it fails, saying so (hostWaitFailure), and the
    // migration rolls back.
    ...(host === undefined
      ? {}
      : {
          taskQueue: hostQueue(workflowInfo().taskQueue, host),
          scheduleToStartTimeout: hostWaitMs(command, spec, undoing),
        }),
    startToCloseTimeout: timeoutMs,
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
 * A placed call that no worker of its host took within its bound (scheduleToStartTimeout): the
 * reason names the host, else undefined.
 */
function hostWaitFailure(
  command: Command,
  spec: MigrationSpec,
  error: unknown,
  undo: boolean,
): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof TimeoutFailure) || cause.timeoutType !== 'SCHEDULE_TO_START') return undefined;
  const host = commandHost(spec, command);
  const within = formatDuration(hostWaitMs(command, spec, undo));
  return `no worker on host ${host} took ${command.kind} within ${within}: is \`cutover worker --host ${host}\` running with this TEMPORAL_TASK_QUEUE?`;
}

/**
 * A shift of routes that run on several hosts (a router per host), as one command per host with
 * that host's routes; undefined when the routes run on one host (or the command sets no routes).
 * Only shifts: an analysed hold and a stateful switch's hold keep their routes on one host
 * (check-topology.ts, prepare-migration.ts).
 */
function routesByHost(spec: MigrationSpec, command: Command): Command[] | undefined {
  if (command.kind !== 'shift_routes' || command.routes.length < 2) return undefined;
  const byHost = new Map<string, string[]>();
  for (const route of command.routes) {
    const host = commandHost(spec, { ...command, routes: [route] }) ?? '';
    byHost.set(host, [...(byHost.get(host) ?? []), route]);
  }
  if (byHost.size < 2) return undefined;
  return [...byHost.values()].map((routes) => ({ ...command, routes }));
}

/**
 * Whether the migration is being undone: its undo steps wait for a host's worker as long as each
 * call may run, not `strategy.hostWait` (which bounds how long the migration waits before it is
 * undone): an undo given up half way would leave a person to finish it.
 */
function undoing(state: MigrationState): boolean {
  return state.lifecycle === 'rolling_back';
}

/**
 * How long a placed call waits for a worker of its host: `strategy.hostWait`, at most the call's
 * own bound; an undo step, the call's own bound (see `undoing`).
 */
function hostWaitMs(command: Command, spec: MigrationSpec, undo: boolean): number {
  const own = activityTimeoutMs(command, spec);
  const wait = spec.desired.strategy.hostWait;
  return undo || wait === undefined ? own : Math.min(wait, own);
}

/**
 * The marker of runs in which a call no worker of its host took within its bound fails its step at
 * once; runs recorded before it retried the step, and replay so.
 */
export const hostWaitFinalPatch = 'host-wait-final';

/**
 * The marker of runs in which an undo step that failed for good (not retryable: the write hold's
 * budget ran out, a driver that cannot do it) goes to a person at once; runs recorded before it
 * retried such a step up to five times, and replay so.
 */
export const undoFinalPatch = 'undo-final';

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

  // The host of the step function (core/migration/host-step.ts, shared with the local runner):
  // notices go to the kept log, cancellations to the command's scope, commands to activities.
  const host = (before: MigrationState['lifecycle'] | null): StepHost => ({
    log,
    cancel: (id) => scopes.get(id)?.cancel(),
    issue: (command) => dispatch(command),
    holdCommands: (next) => {
      state = next;
      if (state.lifecycle !== before) publish();
      if (
        isFinal(state.lifecycle) ||
        !(workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistoryEvents)
      )
        return false;
      if (scopes.size === 0) {
        // Go on in a fresh run, between two commands: what is in `state.inflight` and not yet run
        // is issued there.
        continuing = true;
        return true;
      }
      // With several calls in flight there may never be a moment with none: new commands wait (in
      // `state.inflight`, for the next run) while those running end. A run of the workflow from
      // before ran them at once, and so replays.
      return parallel;
    },
  });
  const apply = (t: Transition, before: MigrationState['lifecycle'] | null) => {
    state = t.state;
    carryOut(t, host(before));
  };

  // Deliveries beside the migration, when its topology has targets. Runs recorded before them
  // (no marker) replay without any.
  const targets = spec.desired.notify ?? {};
  const notifications =
    Object.keys(targets).length > 0 && patched(notificationsPatch)
      ? new WorkflowNotifications(targets, spec.baseDir, log)
      : null;
  const kept = new KeptNotifications();
  const switchNotifications = patched(switchNotificationsPatch);
  const notify = (before: MigrationState | null, event: MigrationEvent) => {
    const all = notificationsOf(before, event, state, events);
    const out = switchNotifications ? all : all.filter((e) => !switchEventNames.includes(e.data.event));
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
    const undo = undoing(state);
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
        const parts = routesByHost(state.spec, command);
        if (parts === undefined) {
          const outcome = await activitiesFor(command, state.spec, undo).runCommand(
            commandView(state, command),
            command,
          );
          return { event: outcome.result, lines: outcome.lines };
        }
        // Routes on several hosts' routers: each host sets its own, at once; the step is done when
        // all are (a failure fails it, and its retry sets them all again).
        const settled = await Promise.allSettled(
          parts.map((part) =>
            activitiesFor(part, state.spec, undo).runCommand(commandView(state, part), part),
          ),
        );
        const thrown = settled.find((r) => r.status === 'rejected');
        if (thrown) throw thrown.reason;
        const outcomes = settled.map((r) => (r as PromiseFulfilledResult<CommandOutcome>).value);
        const failed = outcomes.find((o) => o.result.type !== 'command_succeeded');
        const event = (failed ?? (outcomes[0] as CommandOutcome)).result;
        return { event, lines: outcomes.flatMap((o) => o.lines) };
      })
      .then(
        ({ event, lines }) => {
          scopes.delete(command.id);
          for (const line of lines) log(line);
          // Runs recorded before `undoFinalPatch` retried an undo step that failed for good.
          const recorded =
            event.type === 'command_failed' &&
            !event.error.retryable &&
            state.lifecycle === 'rolling_back' &&
            !patched(undoFinalPatch)
              ? { ...event, error: { ...event.error, retryable: true } }
              : event;
          record({ ...recorded, at: Date.now(), commandId: command.id } as MigrationEvent);
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
            const hostWait = hostWaitFailure(command, state.spec, error, undo);
            const message =
              hostWait ??
              (error instanceof Error
                ? ((error.cause as Error | undefined)?.message ?? error.message)
                : String(error));
            // A call no worker of its host took within its bound is not tried again: the bound
            // (strategy.hostWait) is how long the migration waits for that host, not each attempt's.
            const retryable = hostWait === undefined || !patched(hostWaitFinalPatch);
            record({
              type: 'command_failed',
              at: Date.now(),
              commandId: command.id,
              error: { message, retryable },
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
      record(operatorEvent(verb, Date.now(), by, options));
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
      record(resolveEvent(args.how, Date.now(), args.step, args.by));
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
    pickUp(state, { issue: dispatch, record }, () => Date.now());
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
