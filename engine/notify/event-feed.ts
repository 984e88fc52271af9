/**
 * The notifications of every migration of a state directory, as they happen: what the server's
 * `GET /v1/events` streams. Read from the journals (the one record), derived by the same pure
 * function as the runner's deliveries, so the ids, types and data are the same.
 */
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { start, step } from '../../core/migration/step.js';
import { isFinal, type MigrationEvent, type MigrationState } from '../../core/migration/types.js';
import { notificationsOf } from '../../core/notify/migration-events.js';
import type { CloudEvent } from '../../core/notify/types.js';
import { allMigrations } from '../services/migration-records.js';
import type { StateDir } from '../store/state-dir.js';

/** How often the journals are looked at for new lines. */
export const eventFeedPollMs = 200;

interface Followed {
  offset: number;
  pending: string;
  state: MigrationState | null;
  seq: number;
  /** Ended: no more events will come (a resolve of undo steps may follow; rare, and seen on restart). */
  ended: boolean;
}

/** A resume point: the id of the last event a client got (`<migration>.<seq>.<index>`). */
function parseEventId(id: string | undefined): { migration: string; seq: number; index: number } | null {
  const match = id === undefined ? null : /^(mig_[a-z0-9]+)\.(\d+)\.(\d+)$/.exec(id);
  return match ? { migration: match[1] as string, seq: Number(match[2]), index: Number(match[3]) } : null;
}

/**
 * Events from now on, across every environment; with `after` (a Last-Event-ID), first the events
 * that came after that one (migrations started later included). Ends when `signal` aborts.
 */
export async function* followEvents(
  stateDir: StateDir,
  options: { signal: AbortSignal; after?: string; pollMs?: number },
): AsyncGenerator<CloudEvent> {
  const followed = new Map<string, Followed>();
  const beganMs = Date.now();
  let first = true;
  while (!options.signal.aborted) {
    // Each look gathers what every migration journaled since the last and tells it in time order
    // (a client resumes by time: told out of order, an earlier event would be skipped). On the
    // first look what came before the feed began is history, told only after a resume point.
    const batch: CloudEvent[] = [];
    for (const ref of allMigrations(stateDir)) {
      const key = `${ref.environment}/${ref.id}`;
      let f = followed.get(key);
      if (!f) {
        f = { offset: 0, pending: '', state: null, seq: 0, ended: false };
        followed.set(key, f);
      }
      if (f.ended) continue;
      for (const event of newEvents(stateDir.migration(ref.environment, ref.id).journal, f)) {
        const next: MigrationState =
          f.state === null
            ? start((event as Extract<MigrationEvent, { type: 'created' }>).spec).state
            : step(f.state, event).state;
        f.seq += 1;
        const out = notificationsOf(f.state, event, next, f.seq);
        f.state = next;
        batch.push(...out);
      }
      if (f.state && isFinal(f.state.lifecycle)) f.ended = true;
    }
    yield* first ? firstLook(batch, options.after, beganMs) : inTimeOrder(batch).map((k) => k.event);
    first = false;
    try {
      await sleep(options.pollMs ?? eventFeedPollMs, undefined, { signal: options.signal });
    } catch {
      return;
    }
  }
}

/**
 * The history a client resuming after `after` has not seen, in time order. Events are ordered by
 * (time, id), not by migration: two environments' migrations interleave, and an older migration's
 * event may come after a newer one's. The resume point's time is that of the event it names; a
 * resume point no longer in the history (a pruned migration) falls back to its migration's place.
 */
export function historyAfter(history: CloudEvent[], after: string | undefined): CloudEvent[] {
  const resume = parseEventId(after);
  if (resume === null) return [];
  const keyed = inTimeOrder(history);
  const named = keyed.find((k) => k.event.id === after);
  if (named) return keyed.filter((k) => compareKeys(k.key, named.key) > 0).map((k) => k.event);
  return keyed.filter((k) => k.key.id.migration > resume.migration).map((k) => k.event); // ULIDs sort by time
}

/**
 * What a feed's first look tells: the history after the resume point, and every event since the
 * feed began (`beganMs`). A first look takes a while (in Temporal mode a list and a query per run,
 * seconds under load): a migration that started meanwhile is no history, and its events, passed
 * over, never came (GET /v1/events then waited for a `completed` it had already missed).
 */
export function firstLook(batch: CloudEvent[], after: string | undefined, beganMs: number): CloudEvent[] {
  const resumed = new Set(historyAfter(batch, after).map((event) => event.id));
  return inTimeOrder(batch)
    .filter((k) => resumed.has(k.event.id) || k.key.time >= beganMs)
    .map((k) => k.event);
}

export function inTimeOrder(events: CloudEvent[]): { event: CloudEvent; key: OrderKey }[] {
  return events
    .map((event) => ({ event, key: orderKey(event) }))
    .filter((k): k is { event: CloudEvent; key: OrderKey } => k.key !== null)
    .sort((x, y) => compareKeys(x.key, y.key));
}

interface OrderKey {
  time: number;
  id: NonNullable<ReturnType<typeof parseEventId>>;
}

function orderKey(event: CloudEvent): OrderKey | null {
  const id = parseEventId(event.id);
  return id === null ? null : { time: Date.parse(event.time) || 0, id };
}

function compareKeys(x: OrderKey, y: OrderKey): number {
  if (x.time !== y.time) return x.time - y.time;
  if (x.id.migration !== y.id.migration) return x.id.migration < y.id.migration ? -1 : 1;
  return x.id.seq - y.id.seq || x.id.index - y.id.index;
}

/** The whole lines appended to a journal since the last look (a line being written waits). */
function newEvents(file: string, f: Followed): MigrationEvent[] {
  if (!existsSync(file)) return [];
  const size = statSync(file).size;
  if (size <= f.offset) return [];
  const buffer = Buffer.alloc(size - f.offset);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buffer, 0, buffer.length, f.offset);
  } finally {
    closeSync(fd);
  }
  f.offset = size;
  const lines = (f.pending + buffer.toString('utf8')).split('\n');
  f.pending = lines.pop() ?? '';
  const events: MigrationEvent[] = [];
  for (const line of lines) {
    if (line.trim() === '') continue;
    try {
      events.push(JSON.parse(line) as MigrationEvent);
    } catch {
      return events; // a damaged journal: `migration show` names it; the feed stops reading it
    }
  }
  return events;
}
