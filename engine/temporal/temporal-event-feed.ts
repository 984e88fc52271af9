/**
 * GET /v1/events in Temporal mode: the notifications of every migration, as each migration
 * workflow derived them (the same pure `notificationsOf`, the same ids), polled. Each poll lists
 * the migration runs in flight and those that closed since the feed began (by visibility), and
 * asks each for the notifications past the last one told (a query: a worker answers it, replaying
 * a closed run). A run that does not answer (no worker, a workflow from before the query) is
 * looked at again at the next poll.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { CloudEvent } from '../../core/notify/types.js';
import { firstLook, inTimeOrder } from '../notify/event-feed.js';
import { withDeadline } from './connection.js';
import { ownQueue } from './temporal-visibility.js';
import { notificationsQuery } from './workflow-notify.js';

/** How often Temporal is asked: a list and a query per migration in flight each time. */
export const temporalEventFeedPollMs = 1_000;
/** One query's bound: a run no worker answers is skipped until the next poll. */
const queryDeadlineMs = 5_000;

/** `<migration>.<event number>.<index>`, the id every notification carries. */
function parseEventId(id: string | undefined): { migration: string; seq: number; index: number } | null {
  const match = id === undefined ? null : /^(mig_[a-z0-9]+)\.(\d+)\.(\d+)$/.exec(id);
  return match ? { migration: match[1] as string, seq: Number(match[2]), index: Number(match[3]) } : null;
}

/** Crockford's base 32, in which a ULID's first 10 characters are its time in ms. */
const ulidAlphabet = '0123456789abcdefghjkmnpqrstvwxyz';

function ulidTimeMs(migrationId: string): number | null {
  const head = migrationId.replace(/^mig_/, '').slice(0, 10);
  let ms = 0;
  for (const c of head) {
    const digit = ulidAlphabet.indexOf(c);
    if (digit < 0) return null;
    ms = ms * 32 + digit;
  }
  return ms;
}

/**
 * Events from now on, across every environment of the deployment on `options.taskQueue`; with
 * `after` (a Last-Event-ID), first those after it, from the runs that are in flight or closed since
 * that migration started.
 */
export async function* followTemporalEvents(
  client: Client,
  options: { signal: AbortSignal; taskQueue: string; after?: string; pollMs?: number },
): AsyncGenerator<CloudEvent> {
  const beganMs = Date.now();
  const resume = parseEventId(options.after);
  const resumeMs = resume ? ulidTimeMs(resume.migration) : null;
  const since = new Date(Math.min(Date.now(), resumeMs ?? Number.POSITIVE_INFINITY));
  const query = `WorkflowType = 'migrationWorkflow' AND ${ownQueue(options.taskQueue)} AND (ExecutionStatus = 'Running' OR CloseTime >= '${since.toISOString()}')`;
  /** By migration: the event number of the last notification told (or passed over on the first look). */
  const told = new Map<string, number>();
  /** Closed runs already read to their end. */
  const read = new Set<string>();
  let first = true;
  while (!options.signal.aborted) {
    const runs: Array<{
      workflowId: string;
      runId: string;
      migration: string;
      running: boolean;
      startMs: number;
    }> = [];
    try {
      for await (const execution of client.workflow.list({ query })) {
        const migration = (execution.memo as { migrationId?: string } | undefined)?.migrationId;
        if (typeof migration !== 'string' || read.has(execution.runId)) continue;
        runs.push({
          workflowId: execution.workflowId,
          runId: execution.runId,
          migration,
          running: execution.status.name === 'RUNNING',
          startMs: execution.startTime.getTime(),
        });
      }
    } catch (error) {
      // Temporal unreachable at the start is said (the stream is refused); later, the next poll retries.
      if (first) throw error;
    }
    // Oldest migration first, and a migration's runs in order (a continued run goes on from the last).
    runs.sort((a, b) =>
      a.migration === b.migration ? a.startMs - b.startMs : a.migration < b.migration ? -1 : 1,
    );
    // Each poll tells its batch in time order, as local mode does (engine/notify/event-feed.ts): told
    // migration by migration, an older migration's later event came before a newer one's earlier
    // event, and a client resuming by the newer one's lost it.
    const batch: CloudEvent[] = [];
    for (const run of runs) {
      if (options.signal.aborted) return;
      let events: CloudEvent[];
      try {
        events = await withDeadline(
          client.workflow
            .getHandle(run.workflowId, run.runId)
            .query(notificationsQuery, told.get(run.migration) ?? 0),
          queryDeadlineMs,
        );
      } catch {
        continue;
      }
      const past = told.get(run.migration) ?? 0;
      for (const event of events) {
        // Several notifications of one event share its number: all come in the same answer.
        const seq = parseEventId(event.id)?.seq ?? 0;
        if (seq <= past) continue;
        told.set(run.migration, Math.max(seq, told.get(run.migration) ?? 0));
        batch.push(event);
      }
      if (!run.running) read.add(run.runId);
    }
    // On the first look, what the migrations said before the feed began is history: told only after
    // a resume point. (This look can take seconds: what came meanwhile is told.)
    const tell = first ? firstLook(batch, options.after, beganMs) : inTimeOrder(batch).map((k) => k.event);
    for (const event of tell) {
      if (options.signal.aborted) return;
      yield event;
    }
    first = false;
    try {
      await sleep(options.pollMs ?? temporalEventFeedPollMs, undefined, { signal: options.signal });
    } catch {
      return;
    }
  }
}
