import type { HookPoint } from '../../core/topology/hook-types.js';

/**
 * What a hook is told about the migration that runs it: POSTed as JSON to an HTTP hook, written as
 * JSON to a command hook's stdin and, flattened, into its CUTOVER_* environment variables. Built by
 * the runner from the migration's state; holds no secret.
 */
export interface HookContext {
  /**
   * The hook call's id, `<migration id>.<command id>`: the same on every run of that call (a resumed
   * migration or a lost worker's command runs the hook again: hooks run at least once), so a receiver
   * dedupes on it. `attempt` counts the retries within one run.
   */
  id: string;
  environment: string;
  migrationId: string;
  /** The serial the layout gets when this migration commits. */
  serial: number;
  point: HookPoint;
  /** rollout only: green's share of traffic at this step, in percent. */
  weight?: number;
  /** By component of the plan: the version live now (absent for a new component) and green's. */
  versions: Record<string, { blue?: string; green: string }>;
  /** By component: the addresses (host:port) of its green replicas, to test them directly. */
  green: Record<string, string[]>;
}

/** The JSON body or stdin of one attempt: the context with the hook's name and the attempt. */
export function hookPayload(hook: string, attempt: number, context: HookContext): string {
  return JSON.stringify({ hook, attempt, ...context });
}

/**
 * The context as environment variables, for commands that do not read stdin: CUTOVER_HOOK_ID,
 * CUTOVER_HOOK, CUTOVER_HOOK_POINT, CUTOVER_ATTEMPT, CUTOVER_ENVIRONMENT, CUTOVER_MIGRATION_ID, CUTOVER_SERIAL,
 * CUTOVER_WEIGHT (rollout only), CUTOVER_GREEN_ADDRESSES (`api=127.0.0.1:4001,127.0.0.1:4002
 * web=…`) and CUTOVER_GREEN_VERSIONS (`api=2.1.0 web=5`), components in name order.
 */
export function hookEnvironment(hook: string, attempt: number, context: HookContext): Record<string, string> {
  const components = Object.keys(context.green).sort();
  const versions = Object.keys(context.versions).sort();
  return {
    CUTOVER_HOOK_ID: context.id,
    CUTOVER_HOOK: hook,
    CUTOVER_HOOK_POINT: context.point,
    CUTOVER_ATTEMPT: String(attempt),
    CUTOVER_ENVIRONMENT: context.environment,
    CUTOVER_MIGRATION_ID: context.migrationId,
    CUTOVER_SERIAL: String(context.serial),
    ...(context.weight === undefined ? {} : { CUTOVER_WEIGHT: String(context.weight) }),
    CUTOVER_GREEN_ADDRESSES: components.map((c) => `${c}=${(context.green[c] ?? []).join(',')}`).join(' '),
    CUTOVER_GREEN_VERSIONS: versions.map((c) => `${c}=${context.versions[c]?.green ?? ''}`).join(' '),
  };
}
