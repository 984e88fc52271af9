/**
 * How long one driver call's activity may run before Temporal gives up on that attempt and starts
 * it again from scratch (start-to-close). Each bound is past the longest the call can take when all
 * is well, from what the command itself says, so that a retry means a lost or stuck worker, never a
 * long but healthy call: a hold or a hook retried from scratch would hold twice, or re-run a hook's
 * side effects. Pure and deterministic: the workflow calls it.
 */
import type { Command, MigrationSpec } from '../../core/migration/types.js';

/** Room past a call's own bound: a worker to pick it up, report, and clean up. */
export const activityMarginMs = 60_000;
/** A route call: the router or nginx answers in seconds. */
export const routeCallTimeoutMs = 120_000;
/** Anything else (provisioning, draining, retiring): bounded by its own timeouts, which can be long. */
export const driverCallTimeoutMs = 2 * 60 * 60_000;

export function activityTimeoutMs(command: Command, spec: MigrationSpec): number {
  switch (command.kind) {
    case 'check_health':
      return command.deadlineMs + activityMarginMs;
    case 'apply_route':
    case 'shift_routes':
    case 'remove_route':
    // The switch's steps are bounded by its write hold's budget (seconds).
    case 'hold_routes':
    case 'fence':
    case 'unfence':
    case 'catch_up':
    case 'promote_slot':
    case 'reverse_replication':
      return routeCallTimeoutMs;
    case 'wait_lag':
      return command.timeoutMs + activityMarginMs;
    case 'wait':
      // A hold or the bake watching green (the workflow waits on a timer for a retry).
      return command.ms + activityMarginMs;
    case 'analyze':
      // An operator's extension of the hold can double it while the call runs.
      return 2 * command.ms + activityMarginMs;
    case 'hook': {
      const hook = spec.desired.strategy.hooks?.[command.point]?.[command.index];
      if (hook === undefined) return activityMarginMs; // refused at once by the activity
      // Every attempt to its timeout, and the delays between them.
      return hook.timeout * (hook.retries + 1) + hook.retryDelay * hook.retries + activityMarginMs;
    }
    default:
      return driverCallTimeoutMs;
  }
}
