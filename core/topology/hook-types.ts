import { assertNever } from '../errors.js';
import { type DurationMs, formatDuration } from './duration.js';
import { type EnvValue, type SecretRef, sensitiveText } from './env-value.js';

/**
 * The points of a migration where hooks run, in the order a migration reaches them:
 * - preRollout: after the health gate, before any traffic moves;
 * - rollout: at each traffic shift step, once the step's weights are set;
 * - confirmPromotion: the last gate, after drain and bake, before the commit;
 * - postRollout: after the commit. Invariant: its failure never rolls back (nothing can be undone
 *   after the commit); it is reported as a warning.
 */
export const hookPoints = ['preRollout', 'rollout', 'confirmPromotion', 'postRollout'] as const;
export type HookPoint = (typeof hookPoints)[number];

/** Hooks by point; a point without hooks is absent. Fields in alphabetical order (see normalize.ts). */
export type Hooks = Partial<Record<HookPoint, Hook[]>>;

/** What every hook has, whatever it calls. */
interface HookBase {
  name: string;
  /** Attempts after the first (after a non-2xx answer, no answer, a timeout, or exit 75). */
  retries: number;
  /** Wait between two attempts. */
  retryDelay: DurationMs;
  /** Time limit of one attempt. */
  timeout: DurationMs;
}

export interface HttpHookTarget {
  headers?: Record<string, EnvValue>;
  /** The HMAC-SHA256 key, by name; the model never holds its value. */
  signingSecret?: SecretRef;
  /** The URL, or a secret reference when the URL carries a credential (`https://user:pw@…`, `?token=`). */
  url: string | SecretRef;
}

export type Hook =
  | (HookBase & { http: HttpHookTarget })
  | (HookBase & { command: string[]; env?: Record<string, EnvValue> });

export type HttpHook = Extract<Hook, { http: HttpHookTarget }>;
export type CommandHook = Extract<Hook, { command: string[] }>;

export function isHttpHook(hook: Hook): hook is HttpHook {
  return 'http' in hook;
}

/** As the file has them, once the schema passed: optional fields, durations as text. */
export interface HookFile {
  name: string;
  http?: { url: string | SecretRef; headers?: Record<string, string | SecretRef>; signingSecret?: SecretRef };
  command?: string[];
  env?: Record<string, string | SecretRef>;
  timeout?: string;
  retries?: number;
  retryDelay?: string;
}

export type HooksFile = Partial<Record<HookPoint, HookFile[]>>;

export const hookDefaults = {
  timeoutMs: 30_000,
  /**
   * One retry: a hook's failure rolls the whole migration back, so one blip of the network or of a
   * receiver should not; a command that exits with a code other than 75 is never run again.
   */
  retries: 1,
  retryDelayMs: 1_000,
} as const;

/**
 * How a plan, a log and a failure reason name a hook's target: `POST https://host/check` or the
 * command's argv. A URL's user info and query are left out: they may carry a credential.
 */
export function describeHookTarget(hook: Hook): string {
  return isHttpHook(hook) ? `POST ${shownUrl(hook.http.url)}` : hook.command.join(' ');
}

/** The hooks with every URL as describeHookTarget shows it: what a plan's settings diff compares. */
export function hooksShown(hooks: Hooks): Hooks {
  const out: Hooks = {};
  for (const [point, list] of Object.entries(hooks) as [HookPoint, Hook[]][]) {
    out[point] = list.map((hook) =>
      isHttpHook(hook) && typeof hook.http.url === 'string'
        ? { ...hook, http: { ...hook.http, url: shownUrl(hook.http.url) } }
        : hook,
    );
  }
  return out;
}

/** A URL without what may carry a credential: its user info and query (`https://host/path?…`). */
export function shownUrl(text: string | SecretRef): string {
  if (typeof text !== 'string') return sensitiveText;
  try {
    const url = new URL(text);
    return `${url.protocol}//${url.host}${url.pathname}${url.search ? '?…' : ''}`;
  } catch {
    return text;
  }
}

/** The model's hooks as a file has them (every default written out): for a recorded layout. */
export function hooksFileOf(hooks: Hooks): HooksFile {
  const out: HooksFile = {};
  for (const [point, list] of Object.entries(hooks) as [HookPoint, Hook[]][]) {
    out[point] = list.map((hook) => {
      const base = {
        name: hook.name,
        timeout: formatDuration(hook.timeout),
        retries: hook.retries,
        retryDelay: formatDuration(hook.retryDelay),
      };
      if (isHttpHook(hook)) return { ...base, http: hook.http };
      return hook.env
        ? { ...base, command: hook.command, env: hook.env }
        : { ...base, command: hook.command };
    });
  }
  return out;
}

/**
 * Whether a failed hook at `point` rolls the migration back. Every point before the commit does;
 * postRollout cannot (the commit is the point of no return): its failure is a warning.
 */
export function hookFailureRollsBack(point: HookPoint): boolean {
  switch (point) {
    case 'preRollout':
    case 'rollout':
    case 'confirmPromotion':
      return true;
    case 'postRollout':
      return false;
    default:
      return assertNever(point, 'hook point');
  }
}
