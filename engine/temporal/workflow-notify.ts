/**
 * Notifications in Temporal mode, on the workflow's side (deterministic code): the same CloudEvents
 * as local mode (core/notify: ids from the migration id and the event's sequence, times from the
 * event), each delivered to each target that wants it by an activity on a worker
 * (notify-activity.ts). Deliveries run beside the migration, never on its path: `publish` starts
 * them and returns. Per target they go one at a time, in order, as the local notifier's queues do;
 * a slow target delays only its own later events. At the migration's end (or a continue-as-new)
 * the workflow waits for those under way at most `notifyEndBoundMs`, so a receiver that is down
 * or hangs delays the end by no more than that.
 */
import { condition, defineQuery, isCancellation, proxyActivities } from '@temporalio/workflow';
import type { LogLine } from '../../core/migration/types.js';
import { targetWants } from '../../core/notify/target-filter.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { NotifyTarget } from '../../core/topology/types.js';
import type { CutoverActivities } from './activities.js';

/** The marker of runs that deliver notifications; runs recorded without it replay without them. */
export const notificationsPatch = 'notifications';

/** How long a migration that has ended waits for the deliveries still under way before it completes. */
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

  constructor(
    private readonly targets: Record<string, NotifyTarget>,
    private readonly baseDir: string,
    private readonly log: (line: LogLine) => void,
  ) {}

  /** Starts the delivery of each event to each target that wants it; returns at once. */
  publish(events: readonly CloudEvent[]): void {
    for (const event of events) {
      for (const [name, target] of Object.entries(this.targets)) {
        if (!targetWants(target, event)) continue;
        this.pending++;
        const previous = this.queues.get(name) ?? Promise.resolve();
        const next = previous
          .then(() => this.deliver(name, target, event))
          .finally(() => {
            this.pending--;
          });
        this.queues.set(name, next);
      }
    }
  }

  /**
   * Waits for the deliveries started, at most `boundMs`. Those left run on (their results are then
   * not in the log, which says so) or, not yet started behind a slow one, are dropped.
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
    try {
      const lines = await notifyActivities.deliverNotification({
        name,
        target,
        event,
        baseDir: this.baseDir,
      });
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
