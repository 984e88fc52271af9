import { describeHookTarget, type HookPoint, type Hooks } from '../../core/topology/hook-types.js';
import type { HookContext } from './hook-context.js';
import { type HookResult, type RunHookOptions, runHook } from './run-hook.js';

export type HookPointResult =
  | { ok: true; ran: HookRun[] }
  /** `failed`: the hook that failed; the hooks after it did not run. */
  | { ok: false; failed: string; reason: string; aborted?: true; ran: HookRun[] };

export interface HookRun {
  name: string;
  result: HookResult;
}

/**
 * Runs the hooks of one point in the order of the file, each to its verdict, and stops at the first
 * failure. A line per hook goes to the log. What a failure means is the caller's to decide
 * (hookFailureRollsBack: a rollback before the commit, a warning after it).
 */
export async function runHookPoint(
  hooks: Hooks | undefined,
  point: HookPoint,
  context: Omit<HookContext, 'point'>,
  options: RunHookOptions,
): Promise<HookPointResult> {
  const ran: HookRun[] = [];
  for (const hook of hooks?.[point] ?? []) {
    const result = await runHook(hook, { ...context, point }, options);
    ran.push({ name: hook.name, result });
    if (!result.ok) {
      options.log(result.reason);
      return {
        ok: false,
        failed: hook.name,
        reason: result.reason,
        ran,
        ...(result.aborted ? { aborted: true } : {}),
      };
    }
    const tries = result.attempts > 1 ? ` after ${result.attempts} attempts` : '';
    options.log(`hook ${hook.name} (${describeHookTarget(hook)}) passed${tries} in ${result.ms} ms`);
  }
  return { ok: true, ran };
}
