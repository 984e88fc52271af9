/**
 * Which hosts a migration's calls wait for, read from its workflow's own pending activities
 * (DescribeWorkflowExecution; pure: no Temporal here). A live worker of a host takes a call from
 * its queue at once, so a call scheduled on a host's queue and not started for `unstartedWaitMs`
 * means no live worker polls that host, whatever Temporal's poller list still says (it lists a
 * killed worker for a minute or more: temporal-session.ts, stalePollerMs).
 */

/** A call scheduled this long and not taken: no live worker polls its queue. */
export const unstartedWaitMs = 5_000;

/** temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED (the proto package is not a dependency of ours). */
const pendingActivityScheduled = 1;

/** A protobuf timestamp as the client gives it (seconds a Long, a number or a string). */
interface Timestamp {
  seconds?: { toString(): string } | number | string | null;
  nanos?: number | null;
}

/** The fields of a pending activity (temporal.api.workflow.v1.IPendingActivityInfo) read here. */
export interface PendingActivity {
  state?: number | null;
  scheduledTime?: Timestamp | null;
  activityOptions?: { taskQueue?: { name?: string | null } | null } | null;
}

/**
 * Of `hosts`, those whose queue (`queueOf`) holds a call that has waited for a worker more than
 * `unstartedWaitMs` at `now`: scheduled, not started. A call in retry backoff (scheduled in the
 * future) waits for its time, not for a worker; a pending activity without its task queue (a
 * server that does not say it) tells nothing.
 */
export function hostsWaiting(
  pending: readonly PendingActivity[],
  hosts: readonly string[],
  queueOf: (host: string) => string,
  now: number,
): string[] {
  return hosts.filter((host) =>
    pending.some((activity) => {
      if (activity.state !== pendingActivityScheduled) return false;
      if (activity.activityOptions?.taskQueue?.name !== queueOf(host)) return false;
      const scheduledAt = millis(activity.scheduledTime);
      return scheduledAt !== null && now - scheduledAt > unstartedWaitMs;
    }),
  );
}

function millis(time: Timestamp | null | undefined): number | null {
  if (time?.seconds === undefined || time.seconds === null) return null;
  const seconds = Number(time.seconds.toString());
  return Number.isFinite(seconds) ? seconds * 1000 + Math.floor((time.nanos ?? 0) / 1e6) : null;
}
