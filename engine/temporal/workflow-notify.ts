/**
 * Notifications in Temporal mode, on the workflow's side (deterministic code): the same CloudEvents
 * as local mode (core/notify: ids from the migration id and the event's sequence, times from the
 * event), each delivered to each target that wants it by an activity on a worker
 * (notify-activity.ts). Deliveries run beside the migration, never on its path: `publish` starts
 * them and returns. Per target they go one at a time, in order, as the local notifier's queues do;
 * a slow target delays only its own later events. At the migration's end (or a continue-as-new)
 * the deliveries not done are handed to a child workflow of their own (`notifyWorkflow`, abandoned
 * by its parent's close) and the migration's run ends at once: the environment's workflow id is
 * never held open for a delivery, so the next migration, or a resolve, starts as soon as the state
 * is final. (Runs recorded before the hand-off waited for them at most `notifyEndBoundMs`, then
 * ended, which cancelled those left.)
 */
import {
  CancellationScope,
  condition,
  defineQuery,
  isCancellation,
  ParentClosePolicy,
  proxyActivities,
  startChild,
} from '@temporalio/workflow';
import type { LogLine } from '../../core/migration/types.js';
import { targetWants } from '../../core/notify/target-filter.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { NotifyTarget } from '../../core/topology/types.js';
import type { CutoverActivities } from './activities.js';

/** The marker of runs that deliver notifications; runs recorded without it replay without them. */
export const notificationsPatch = 'notifications';

/**
 * The marker of runs that deliver the notifications of a stateful switch (switchEventNames: the
 * write hold, the replication lag); runs recorded without it replay without them.
 */
export const switchNotificationsPatch = 'switch-notifications';

/**
 * The marker of runs that hand the deliveries left at their end to `notifyWorkflow`; runs recorded
 * without it (but with `notificationsPatch`) replay the bounded wait instead.
 */
export const notifyHandOffPatch = 'notify-hand-off';

/** The workflow id of the deliveries a migration's run left at its `events`-th event. */
export function notifyWorkflowId(migrationId: string, events: number): string {
  return `cutover-notify-${migrationId}-${events}`;
}

/** What `notifyWorkflow` delivers: per target, in order, the events its parent had not delivered. */
export interface NotifyInput {
  targets: Record<string, NotifyTarget>;
  baseDir: string;
  events: Record<string, CloudEvent[]>;
}

/** Runs recorded before the hand-off: how long a migration that has ended waited for the deliveries still under way before it completes. */
export const notifyEndBoundMs = 2_000;

/**
 * A delivery's activity: the notifier's whole budget (60 s, engine/notify/notifier.ts) and room to
 * report. The notifier retries within it; the activity is retried once more only when its worker
 * is lost (noticed by heartbeats within 5 s).
 */
const deliverTimeoutMs = 75_000;

const notifyActivities = proxyActivities<CutoverActivities>({
  startToCloseTimeout: deliverTimeoutMs,
  heartbeatTimeout: 5_000,
  retry: { initialInterval: 1_000, maximumAttempts: 2 },
});

export class WorkflowNotifications {
  private readonly queues = new Map<string, Promise<void>>();
  private pending = 0;
  /** Per target, the events published and not yet delivered (or given up), oldest first. */
  private readonly undone = new Map<string, CloudEvent[]>();
  /** Per target, the scope of the delivery under way. */
  private readonly running = new Map<string, CancellationScope>();
  /** Set at the hand-off: nothing more is started here. */
  private handedOff = false;

  constructor(
    private readonly targets: Record<string, NotifyTarget>,
    private readonly baseDir: string,
    private readonly log: (line: LogLine) => void,
  ) {}

  /** Starts the delivery of each event to each target that wants it; returns at once. */
  publish(events: readonly CloudEvent[]): void {
    for (const event of events) {
      for (const [name, target] of Object.entries(this.targets)) {
        if (targetWants(target, event)) this.enqueue(name, target, event);
      }
    }
  }

  /** Queues one delivery to one target, after those queued before it. */
  enqueue(name: string, target: NotifyTarget, event: CloudEvent): void {
    this.pending++;
    const undone = this.undone.get(name) ?? [];
    undone.push(event);
    this.undone.set(name, undone);
    const previous = this.queues.get(name) ?? Promise.resolve();
    const next = previous
      .then(() => this.deliver(name, target, event))
      .finally(() => {
        this.pending--;
        undone.splice(undone.indexOf(event), 1);
      });
    this.queues.set(name, next);
  }

  /** Deliveries under way or queued. */
  busy(): boolean {
    return this.pending > 0;
  }

  /** Waits until every delivery queued is done (each is bounded by its activity's timeout). */
  async drain(): Promise<void> {
    await condition(() => this.pending === 0);
  }

  /**
   * Starts `notifyWorkflow` (id `childId`) with the deliveries not done, abandoned when this run
   * closes, and returns once it has started. The deliveries under way here are cancelled first
   * (one scheduled in this very workflow task, as the final event's, is then never sent); one a
   * receiver already holds is sent again by the child, with the same CloudEvent id.
   */
  async handOff(childId: string): Promise<void> {
    this.handedOff = true;
    for (const scope of this.running.values()) scope.cancel();
    const events: Record<string, CloudEvent[]> = {};
    const targets: Record<string, NotifyTarget> = {};
    let n = 0;
    for (const [name, list] of this.undone) {
      if (list.length === 0) continue;
      events[name] = [...list];
      targets[name] = this.targets[name] as NotifyTarget;
      n += list.length;
    }
    if (n === 0) return;
    const input: NotifyInput = { targets, baseDir: this.baseDir, events };
    await startChild('notifyWorkflow', {
      workflowId: childId,
      args: [input],
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
    this.log({
      at: Date.now(),
      level: 'info',
      kind: 'notify',
      message: `notify: ${n} ${n === 1 ? 'delivery' : 'deliveries'} not done when the migration's run ended: handed to workflow ${childId}, so their results are not in this log`,
    });
  }

  /**
   * Runs recorded before the hand-off: waits for the deliveries started, at most `boundMs`. Those
   * left were cancelled when the run ended (the log says their results are not in it), and those
   * queued behind a slow one never started.
   */
  async settle(boundMs: number = notifyEndBoundMs): Promise<void> {
    if (this.pending === 0) return;
    if (await condition(() => this.pending === 0, boundMs)) return;
    const n = this.pending;
    this.log({
      at: Date.now(),
      level: 'warn',
      kind: 'notify',
      message: `notify: ${n} ${n === 1 ? 'delivery' : 'deliveries'} not done ${boundMs} ms after the migration's run ended: left, so their results are not in this log`,
    });
  }

  private async deliver(name: string, target: NotifyTarget, event: CloudEvent): Promise<void> {
    if (this.handedOff) return;
    const scope = new CancellationScope();
    this.running.set(name, scope);
    try {
      const lines = await scope.run(() =>
        notifyActivities.deliverNotification({ name, target, event, baseDir: this.baseDir }),
      );
      for (const line of lines) this.log(line);
    } catch (error) {
      if (isCancellation(error)) return;
      const cause =
        error instanceof Error
          ? ((error.cause as Error | undefined)?.message ?? error.message)
          : String(error);
      this.log({
        at: Date.now(),
        level: 'warn',
        kind: 'notify',
        message: `notify ${name}: gave up on ${event.type.replace(/^dev\.cutover\./, '')}: the worker's delivery failed: ${cause}`,
      });
    } finally {
      this.running.delete(name);
    }
  }
}

/**
 * The notifications of the run so far whose event number is past the argument, oldest first: what
 * the server's GET /v1/events polls (engine/temporal/temporal-event-feed.ts). A run keeps its own
 * (the last `keptNotifications`); a continued run starts a fresh list with the numbers going on.
 */
export const notificationsQuery = defineQuery<CloudEvent[], [number]>('notifications');

/** Notifications kept in workflow memory for the feed; older ones are dropped. */
export const keptNotifications = 500;

/**
 * The notifications a run has derived, for the feed: kept whatever the topology's targets (a pure
 * computation: nothing in the history depends on it). The component versions, the same in every
 * event of a migration and the bulk of one in a large topology, are held once.
 */
export class KeptNotifications {
  private kept: Array<{ seq: number; event: CloudEvent }> = [];
  private versions: CloudEvent['data']['versions'] | null = null;

  add(seq: number, events: readonly CloudEvent[]): void {
    for (const event of events) {
      this.versions ??= event.data.versions;
      this.kept.push({ seq, event: { ...event, data: { ...event.data, versions: this.versions } } });
    }
    if (this.kept.length > keptNotifications)
      this.kept = this.kept.slice(this.kept.length - keptNotifications);
  }

  after(seq: number): CloudEvent[] {
    return this.kept.filter((k) => k.seq > seq).map((k) => k.event);
  }
}

/**
 * The deliveries a migration's run left at its end (`WorkflowNotifications.handOff`), under their
 * own workflow id, so that they never hold the environment's: per target in order, as before.
 * Returns their result lines.
 */
export async function notifyWorkflow(input: NotifyInput): Promise<LogLine[]> {
  const lines: LogLine[] = [];
  const deliveries = new WorkflowNotifications(input.targets, input.baseDir, (line) => lines.push(line));
  for (const [name, events] of Object.entries(input.events)) {
    const target = input.targets[name];
    if (target === undefined) continue;
    for (const event of events) deliveries.enqueue(name, target, event);
  }
  await deliveries.drain();
  return lines;
}
