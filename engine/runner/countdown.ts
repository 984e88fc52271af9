/**
 * Progress during a timed wait (a shift step's hold, the bake, an analysis window): a line now and
 * then saying how long is left, so two minutes of `hold: 2m` are not two minutes of silence. At most
 * every 10 s, and about four lines for a short wait (never more often than once a second): a log,
 * not a flood.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../../core/topology/duration.js';

/** The longest silence during a wait. */
export const countdownIntervalMs = 10_000;

/** How often a wait of `totalMs` says how long is left. */
export function countdownEvery(totalMs: number): number {
  return Math.min(countdownIntervalMs, Math.max(1_000, Math.floor(totalMs / 4)));
}

/**
 * Time left, to the nearest second (never 0): `1m40s`, `9s`. Not the second above: a timer may fire
 * a millisecond early, and 3,001 ms left one second into `hold: 4s` read as "4s left of 4s" (ci18).
 */
export function leftText(ms: number): string {
  return formatDuration(Math.max(1, Math.round(ms / 1_000)) * 1_000);
}

/** Sleeps `ms`, calling `say` with the time left at each interval before the end (never at it). */
export async function sleepCounting(
  ms: number,
  signal: AbortSignal,
  say: (leftMs: number) => void,
): Promise<void> {
  const endsAt = Date.now() + ms;
  const every = countdownEvery(ms);
  for (;;) {
    const left = endsAt - Date.now();
    if (left <= 0) return;
    await sleep(Math.min(every, left), undefined, { signal });
    const after = endsAt - Date.now();
    if (after >= 500) say(after);
  }
}

/** Says at most once per `countdownEvery(totalMs)`: for progress from a loop that looks more often. */
export function throttled(totalMs: number, say: (text: string) => void): (text: string) => void {
  const every = countdownEvery(totalMs);
  let last = Date.now();
  return (text) => {
    const now = Date.now();
    if (now - last < every) return;
    last = now;
    say(text);
  };
}
