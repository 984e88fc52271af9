import type { AnalysisSettings } from '../analysis/analysis-settings.js';
import type { DurationMs } from '../topology/duration.js';
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

/** One route's analysis settings at a step: what an `analyze` command measures. */
export interface RouteAnalysis {
  route: string;
  analysis: AnalysisSettings;
}

/**
 * How routes shifted together dwell at one of their steps: the longest hold any of them asks
 * there, or manual when any asks it (nobody's hold is cut short), and every route's analysis.
 */
export interface StepDwell {
  weight: number;
  hold: DurationMs | 'manual';
  analyses: RouteAnalysis[];
}

/** The dwells of routes shifted together, by weight ascending; steps without a hold have none. */
export function shiftDwells(routes: readonly (readonly [string, Pick<Route, 'holds'>])[]): StepDwell[] {
  const byWeight = new Map<number, StepDwell>();
  for (const [name, route] of routes) {
    for (const hold of route.holds ?? []) {
      const dwell = byWeight.get(hold.weight) ?? { weight: hold.weight, hold: 0, analyses: [] };
      dwell.hold =
        dwell.hold === 'manual' || hold.hold === 'manual' ? 'manual' : Math.max(dwell.hold, hold.hold);
      if (hold.analysis) dwell.analyses.push({ route: name, analysis: hold.analysis });
      byWeight.set(hold.weight, dwell);
    }
  }
  return [...byWeight.values()].sort((a, b) => a.weight - b.weight);
}
