/**
 * The load of a zero-failure test (bench/load.js), set for a test run on a busy machine: the run's
 * other files, the CLI and the router share two cores with it. Whether every request succeeded is
 * judged on every request due, and the rate on when they were sent.
 */
import { type Load, startLoad } from '../../bench/load.js';
import { eventually } from './wait.js';

/**
 * Every request due is sent (at most `timeoutMs` × `rate` can be waiting; those past the 64
 * connections wait in the generator), so none is skipped and counted failed as 'load generator
 * saturated' while the router answers late on a CPU-bound machine: beside two CPU hogs (load 15-25),
 * 256 requests waited there for half a second and the next ones were dropped. A router that stops
 * answering still fails the test: each request waits at most `timeoutMs` for its answer.
 */
const unbounded = 100_000;

/**
 * `rate` requests/s to `url` until stopped, from a process of its own in a session of its own
 * (`ownProcess`): Linux schedules a session as one group (autogroup), so the generator keeps its
 * share of the cores beside a busy run. From a worker thread of the test's process, beside two CPU
 * hogs, it fell 889 ms behind its schedule.
 */
export function startTestLoad(options: {
  url: string;
  rate: number;
  timeoutMs?: number;
  http2?: boolean;
}): Load {
  return startLoad({ ...options, ownProcess: true, maxInFlight: unbounded });
}

/**
 * The share of a test load's rate it must have been sent at for "zero failed under load" to mean
 * something: the generator never skips a request (it catches up), so a lower rate is a generator
 * starved of CPU on the shared 2 cores, not a slow router. 424-445 of 500/s was seen beside a busy
 * run and 373 of 500/s (0.75) once in a CI run of three workers, where 0.8 failed a test whose
 * every request had succeeded; 300/s is still a load the router's cutover must carry.
 */
export const minSentShare = 0.6;

/**
 * The rate requests were sent at (from the first send to the last). Not the result's `rate`, which
 * divides by the time until the last reply: answers that come late on a busy machine (or after
 * podman's 1 s SYN retransmit of a new connection, now and then, while the engine creates or
 * removes a container) would read as a lower rate sent.
 */
export function sentRate(result: { records: readonly { sentAt: number }[] }): number {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const { sentAt } of result.records) {
    first = Math.min(first, sentAt);
    last = Math.max(last, sentAt);
  }
  return result.records.length < 2 ? 0 : (result.records.length - 1) / ((last - first) / 1000);
}

/**
 * Resolves once `load` has had `count` answers that ended after `sinceMs` (ms since the epoch):
 * the load before a change (answers from the old side) or after it (answers from the new side),
 * waited for as they come instead of a fixed time. Fails after `timeoutMs` (at 500 requests/s, 100
 * answers take 0.2 s; the records reach this process up to ~50 ms late).
 */
export async function loadAnswers(
  load: Pick<Load, 'origin' | 'records'>,
  count: number,
  sinceMs = load.origin,
  timeoutMs = 10_000,
): Promise<void> {
  const after = () => load.records.filter((r) => load.origin + (r.doneAt ?? 0) > sinceMs).length;
  await eventually(
    () => after() >= count,
    timeoutMs,
    () => `${after()} of ${count} answers`,
  );
}
