/**
 * Waiting for an event the test can only observe by looking: one polling loop for every test, so
 * that none asserts after a fixed sleep. The bounds are generous (a loaded machine is slow); a
 * condition that holds returns at the next poll.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a condition is looked at again. */
const pollIntervalMs = 20;

/**
 * Polls `check` until it holds; throws after `timeoutMs`, with `context()` (say, a process's
 * output so far) in the message.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  context?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms${context ? `:\n${context()}` : ''}`);
    }
    await sleep(pollIntervalMs);
  }
}

/** Polls `check` until it holds or `timeoutMs` passes; whether it held, for a test that asserts it. */
export async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(pollIntervalMs);
  }
  return check();
}
