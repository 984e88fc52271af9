import { describeHookTarget, type HookPoint, type Hooks, hookPoints } from '../topology/hook-types.js';

/**
 * A hook as a plan shows it to reviewers: where it runs, its name and what it calls; never a
 * header, a signing key or a URL's credentials (see describeHookTarget).
 */
export interface PlanHook {
  point: HookPoint;
  name: string;
  /** `POST https://host/path` or the command's argv joined by spaces. */
  target: string;
}

/** The hooks in the order a migration reaches them (hookPoints), each point's in file order. */
export function planHooks(hooks: Hooks): PlanHook[] {
  return hookPoints.flatMap((point) =>
    (hooks[point] ?? []).map((hook) => ({ point, name: hook.name, target: describeHookTarget(hook) })),
  );
}

/** For reviewers: `preRollout db-check (./check.sh), rollout smoke (POST http://…/check)`. */
export function describePlanHooks(hooks: readonly PlanHook[]): string {
  return hooks.map((h) => `${h.point} ${h.name} (${h.target})`).join(', ');
}
