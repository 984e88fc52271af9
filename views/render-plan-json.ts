import type { Plan } from '../core/plan/types.js';

/** The plan JSON contract (DESIGN.md §3): the plan as the engine made it, two-space indented. */
export function renderPlanJson(plan: Plan): string {
  return `${JSON.stringify(plan, null, 2)}\n`;
}
