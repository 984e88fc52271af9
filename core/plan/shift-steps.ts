import type { Route } from '../topology/types.js';

/**
 * The steps of routes shifted together: every percentage any of them lists, ascending. All the
 * routes are at the same weight at each step, so a route whose own steps are coarser moves in the
 * finer steps of the others (never faster than it asked). Each list ends at 100, so this one does.
 */
export function shiftSteps(routes: readonly Pick<Route, 'shift'>[]): number[] {
  const steps = new Set<number>();
  for (const route of routes) for (const percent of route.shift) steps.add(percent);
  return [...steps].sort((a, b) => a - b);
}
