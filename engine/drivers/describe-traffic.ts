import type { RouteState } from './types.js';

/**
 * How a route's traffic reads in a driver's log line. After the commit the route's only slot is
 * the green one this migration brought up (`promoted`): that reads as green promoted, never as
 * "100% blue", which an operator would take for a rollback.
 */
export function describeTraffic(state: RouteState): string {
  if (state.promoted) return `green (${state.blue?.version ?? '?'}) promoted; 100% on it`;
  return `${100 - state.greenPercent}% blue, ${state.greenPercent}% green`;
}
