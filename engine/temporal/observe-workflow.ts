/**
 * The observe workflow: one look at what runs, on a worker. Deterministic code only.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { ObservedLayout } from '../../core/observed.js';
import type { CutoverActivities, ObserveInput } from './activities.js';

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
