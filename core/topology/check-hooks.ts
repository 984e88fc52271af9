import type { PathProblem } from './diagnostic.js';
import { parseDuration } from './duration.js';
import { type HookFile, type HooksFile, hookPoints } from './hook-types.js';

/** The longest time limit of one hook attempt, and the longest wait between attempts: a day. */
export const maxHookDurationMs = 24 * 3_600_000;

/**
 * What the schema of `strategy.hooks` cannot say: each hook calls exactly one thing, `env` goes
 * with a command, names are unique across every point (failure reasons and logs name hooks), and
 * durations are sane. Takes a schema-valid fragment; returns every problem.
 */
export function checkHooks(hooks: HooksFile | undefined): PathProblem[] {
  const problems: PathProblem[] = [];
  if (!hooks) return problems;
  const seen = new Map<string, string>();
  for (const point of hookPoints) {
    (hooks[point] ?? []).forEach((hook, i) => {
      const at = ['strategy', 'hooks', point, i];
      checkHook(hook, at, problems);
      const first = seen.get(hook.name);
      if (first !== undefined) {
        problems.push({
          path: [...at, 'name'],
          message: `repeats the name of ${first}; give each hook its own name`,
        });
      } else {
        seen.set(hook.name, `strategy.hooks.${point}[${i}]`);
      }
    });
  }
  return problems;
}

function checkHook(hook: HookFile, at: (string | number)[], problems: PathProblem[]): void {
  if (hook.http !== undefined && hook.command !== undefined) {
    problems.push({ path: at, message: 'has http and command; give exactly one' });
  } else if (hook.http === undefined && hook.command === undefined) {
    problems.push({
      path: at,
      message: 'needs what to call: http: { url: … } or command: [program, args…]',
    });
  }
  if (hook.env !== undefined && hook.command === undefined) {
    problems.push({
      path: [...at, 'env'],
      message: 'is for command hooks; an http hook takes http.headers',
      atKey: true,
    });
  }
  const timeout = hook.timeout === undefined ? undefined : parseDuration(hook.timeout);
  if (timeout === 0) problems.push({ path: [...at, 'timeout'], message: 'must be longer than 0s' });
  for (const field of ['timeout', 'retryDelay'] as const) {
    const text = hook[field];
    const ms = text === undefined ? undefined : parseDuration(text);
    if (ms !== undefined && ms > maxHookDurationMs) {
      problems.push({ path: [...at, field], message: 'is too long: at most 24h' });
    }
  }
}
