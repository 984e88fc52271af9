import type { Action, Plan, Stage } from '../plan/types.js';

/** Lookups over a plan's actions, computed once per plan: the step function runs once per event. */
export interface PlanIndex {
  /** Action id → its index in plan.actions. */
  byId: Map<string, number>;
  /** Component → the index of its provision action. */
  provisionOf: Map<string, number>;
  /** Stage → [first index, last index + 1]: stages are contiguous in plan order. */
  stageRange: Map<Stage, [number, number]>;
}

/**
 * Cache: keyed by the plan object, which a migration never changes, so not state (the same plan
 * always gives the same index, and the step function stays a function of its inputs). Weak: an
 * index goes with its plan.
 */
const cache = new WeakMap<Plan, PlanIndex>();

export function planIndex(plan: Plan): PlanIndex {
  const hit = cache.get(plan);
  if (hit) return hit;
  const byId = new Map<string, number>();
  const provisionOf = new Map<string, number>();
  const stageRange = new Map<Stage, [number, number]>();
  plan.actions.forEach((a: Action, i) => {
    byId.set(a.id, i);
    if (a.type === 'provision' && a.component !== undefined) provisionOf.set(a.component, i);
    const range = stageRange.get(a.stage);
    if (range) range[1] = i + 1;
    else stageRange.set(a.stage, [i, i + 1]);
  });
  const index = { byId, provisionOf, stageRange };
  cache.set(plan, index);
  return index;
}

/** Whether `value` is in `sorted` (ascending). */
export function sortedHas(sorted: readonly number[], value: number): boolean {
  const i = lowerBound(sorted, value);
  return sorted[i] === value;
}

/** The first position in `sorted` (ascending) whose value is not below `value`. */
export function lowerBound(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] as number) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
